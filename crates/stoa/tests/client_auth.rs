//! Client certificates (`[[tls]] client_auth`) end to end: a test CA, a
//! good client, a revoked one (CRL) and one from a foreign CA, all made
//! with `openssl`, presented by curl over HTTP/1.1 and HTTP/2. What a CGI
//! script, a FastCGI application and a proxied application see is
//! compared with what `openssl x509` prints of the same certificate (the
//! names mod_ssl and nginx give them come from OpenSSL), and the access
//! phase's `require_client_cert` answers 403 or 421 as nginx would.
//!
//! Needs the Debian packages curl (with HTTP/2), openssl and python3.

mod common;
mod proxy_peer;

use common::*;
use proxy_peer::Backend;
use std::path::{Path, PathBuf};
use std::process::Command;

const HELLO_FCGI: &str = env!("CARGO_BIN_EXE_stoa-hello-fcgi");

fn openssl(dir: &Path, args: &[&str]) -> String {
    require("openssl", "openssl");
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The files of a test PKI, under one directory.
struct Pki {
    dir: PathBuf,
}

/// A P-256 key and a request for `subject` signed with it, in `dir`.
fn key_and_csr(dir: &Path, key: &str, csr: &str, subject: &str) {
    openssl(
        dir,
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            key,
        ],
    );
    openssl(
        dir,
        &["req", "-new", "-key", key, "-subj", subject, "-out", csr],
    );
}

impl Pki {
    /// A CA (`ca.pem`), clients `alice` and `mallory` it signs, `mallory`
    /// revoked in `crl.pem`, and `eve` signed by another CA (`other.pem`);
    /// a server certificate for localhost, a.test and b.test (`stoa
    /// cert`).
    fn make(dir: &TempDir) -> Pki {
        let d = dir.mkdir("pki");
        let ext_ca = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n";
        let ext_client =
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n";
        std::fs::write(d.join("ca.ext"), ext_ca).expect("write");
        std::fs::write(d.join("client.ext"), ext_client).expect("write");
        std::fs::write(
            d.join("ca.cnf"),
            "[ca]\ndefault_ca = CA_default\n[CA_default]\ndatabase = index.txt\ncrlnumber = crlnumber\n\
             default_md = sha256\ndefault_crl_days = 30\n",
        )
        .expect("write");
        std::fs::write(d.join("index.txt"), "").expect("write");
        std::fs::write(d.join("crlnumber"), "01\n").expect("write");
        for (ca, subject) in [
            ("ca", "/CN=Stoa Test CA/O=Stoa Tests"),
            ("other", "/CN=Other CA"),
        ] {
            let key = format!("{ca}.key");
            let csr = format!("{ca}.csr");
            let pem = format!("{ca}.pem");
            key_and_csr(&d, &key, &csr, subject);
            openssl(
                &d,
                &[
                    "x509", "-req", "-in", &csr, "-signkey", &key, "-days", "30", "-extfile",
                    "ca.ext", "-out", &pem,
                ],
            );
        }
        for (name, ca, serial, subject) in [
            (
                "alice",
                "ca",
                "0x1001",
                "/C=DE/O=Stoa Tests/OU=QA, Berlin/CN=alice",
            ),
            ("mallory", "ca", "0x1002", "/CN=mallory"),
            ("eve", "other", "0x1003", "/CN=eve"),
        ] {
            let key = format!("{name}.key");
            let csr = format!("{name}.csr");
            let pem = format!("{name}.pem");
            key_and_csr(&d, &key, &csr, subject);
            openssl(
                &d,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    &format!("{ca}.pem"),
                    "-CAkey",
                    &format!("{ca}.key"),
                    "-set_serial",
                    serial,
                    "-days",
                    "30",
                    "-extfile",
                    "client.ext",
                    "-out",
                    &pem,
                ],
            );
        }
        let ca_args = ["-config", "ca.cnf", "-keyfile", "ca.key", "-cert", "ca.pem"];
        let mut revoke = vec!["ca"];
        revoke.extend(ca_args);
        revoke.extend(["-revoke", "mallory.pem"]);
        openssl(&d, &revoke);
        let mut gencrl = vec!["ca"];
        gencrl.extend(ca_args);
        gencrl.extend(["-gencrl", "-out", "crl.pem"]);
        openssl(&d, &gencrl);
        let out = Command::new(stoa_bin())
            .arg("cert")
            .arg(d.join("server"))
            .args(["localhost", "a.test", "b.test"])
            .output()
            .expect("run stoa cert");
        assert!(out.status.success(), "stoa cert: {out:?}");
        Pki { dir: d }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// What `openssl x509` prints for `-noout ARG` of a client's certificate,
    /// after `PREFIX=`.
    fn x509(&self, name: &str, args: &[&str]) -> String {
        let pem = format!("{name}.pem");
        let mut a = vec!["x509", "-in", &pem, "-noout"];
        a.extend(args);
        let out = openssl(&self.dir, &a);
        let line = out.trim();
        line.split_once('=').map_or(line, |(_, v)| v).to_owned()
    }
}

/// A site over TLS whose `[[tls]]` block has `client_auth` (TOML), with
/// a CGI script and a FastCGI pool that print their environment, a route
/// that requires a client certificate, and `pools` and `routes` (TOML)
/// when given.
fn site(dir: &TempDir, pki: &Pki, client_auth: &str, pools: &str, routes: &str) -> Server {
    Server::with_config(&site_config(dir, pki, client_auth, pools, routes))
}

/// [`site`]'s configuration file, written.
fn site_config(dir: &TempDir, pki: &Pki, client_auth: &str, pools: &str, routes: &str) -> PathBuf {
    dir.write("www/index.html", "x");
    dir.write("www/secret/index.html", "secret");
    let env = dir.write(
        "cgi-bin/env.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nenv\n",
    );
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    dir.write(
        "stoa.toml",
        format!(
            "workers = 1\nuser = \"root\"\n\n[log]\naccess = \"off\"\n\n\
             [[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\n\
             client_auth = {client_auth}\n\n\
             [[pool]]\nname = \"app\"\ncommand = [\"{HELLO_FCGI}\"]\nprocesses = 1\n\n\
             {pools}\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"cgi-bin\" }}\n\n\
             [[site.route]]\nprefix = \"/app/\"\nfastcgi = {{ pool = \"app\" }}\n\n\
             [[site.route]]\nprefix = \"/secret/\"\nrequire_client_cert = true\nstatic = {{}}\n\n{routes}",
            pki.path("server/cert.pem").display(),
            pki.path("server/key.pem").display(),
        ),
    )
}

#[derive(Debug)]
struct Got {
    ok: bool,
    status: u16,
    body: String,
    /// curl's message (in failures' Debug output).
    #[allow(dead_code)]
    stderr: String,
}

/// curl to `https://NAME:PORT/PATH` (NAME resolving to 127.0.0.1),
/// trusting the server's certificate, presenting client `who`'s
/// certificate when given.
fn curl(s: &Server, pki: &Pki, name: &str, who: Option<&str>, path: &str, extra: &[&str]) -> Got {
    require("curl", "curl");
    let port = s.addr.port();
    let mut c = Command::new("curl");
    c.args(["-sS", "--max-time", "10", "--resolve"])
        .arg(format!("{name}:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(pki.path("server/cert.pem"));
    if let Some(w) = who {
        c.arg("--cert")
            .arg(pki.path(&format!("{w}.pem")))
            .arg("--key")
            .arg(pki.path(&format!("{w}.key")));
    }
    let out = c
        .args(extra)
        .args(["-w", "\n%{http_code}"])
        .arg(format!("https://{name}:{port}{path}"))
        .output()
        .expect("run curl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
    Got {
        ok: out.status.success(),
        status: status.trim().parse().unwrap_or(0),
        body: body.to_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn var<'a>(text: &'a str, prefix: &str, name: &str) -> Option<&'a str> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
}

const PROTOCOLS: [&str; 2] = ["--http1.1", "--http2"];

/// mod_ssl's `SSLOptions +StdEnvVars +ExportCertData` names, with the
/// values OpenSSL prints for the same certificate (`-nameopt RFC2253`,
/// which mod_ssl and nginx use), over HTTP/1.1 and HTTP/2, for CGI and
/// FastCGI alike.
#[test]
fn a_verified_client_reaches_cgi_and_fastcgi_as_mod_ssl_names_it_over_both_protocols() {
    let dir = TempDir::new("clientauth-cgi");
    let pki = Pki::make(&dir);
    let auth = format!(
        "{{ ca = {:?}, crl = {:?} }}",
        pki.path("ca.pem"),
        pki.path("crl.pem")
    );
    let s = site(&dir, &pki, &auth, "", "");
    let subject = pki.x509("alice", &["-subject", "-nameopt", "RFC2253"]);
    let issuer = pki.x509("alice", &["-issuer", "-nameopt", "RFC2253"]);
    assert_eq!(subject, r"CN=alice,OU=QA\, Berlin,O=Stoa Tests,C=DE");
    let serial = pki.x509("alice", &["-serial"]);
    let fingerprint = pki
        .x509("alice", &["-fingerprint", "-sha1"])
        .replace(':', "")
        .to_ascii_lowercase();
    let start = pki.x509("alice", &["-startdate"]);
    for proto in PROTOCOLS {
        let g = curl(
            &s,
            &pki,
            "localhost",
            Some("alice"),
            "/cgi-bin/env.sh",
            &[proto],
        );
        assert_eq!(g.status, 200, "{proto}: {g:?}");
        let t = &g.body;
        assert_eq!(
            var(t, "", "SSL_CLIENT_VERIFY"),
            Some("SUCCESS"),
            "{proto}: {t}"
        );
        assert_eq!(var(t, "", "SSL_CLIENT_S_DN"), Some(subject.as_str()), "{t}");
        assert_eq!(var(t, "", "SSL_CLIENT_I_DN"), Some(issuer.as_str()), "{t}");
        assert_eq!(var(t, "", "SSL_CLIENT_S_DN_CN"), Some("alice"), "{t}");
        assert_eq!(var(t, "", "SSL_CLIENT_S_DN_OU"), Some("QA, Berlin"), "{t}");
        assert_eq!(
            var(t, "", "SSL_CLIENT_I_DN_CN"),
            Some("Stoa Test CA"),
            "{t}"
        );
        assert_eq!(
            var(t, "", "SSL_CLIENT_M_SERIAL"),
            Some(serial.as_str()),
            "{t}"
        );
        assert_eq!(var(t, "", "SSL_CLIENT_M_VERSION"), Some("3"), "{t}");
        assert_eq!(
            var(t, "", "SSL_CLIENT_V_START"),
            Some(start.as_str()),
            "{t}"
        );
        assert_eq!(
            var(t, "", "SSL_CLIENT_FINGERPRINT"),
            Some(fingerprint.as_str()),
            "{t}"
        );
        assert_eq!(
            var(t, "", "SSL_CLIENT_CERT"),
            Some("-----BEGIN CERTIFICATE-----"),
            "{t}"
        );
        assert_eq!(var(t, "", "HTTPS"), Some("on"), "{t}");

        let g = curl(
            &s,
            &pki,
            "localhost",
            Some("alice"),
            "/app/x?params=1",
            &[proto],
        );
        assert_eq!(g.status, 200, "{proto}: {g:?}");
        let t = &g.body;
        assert_eq!(
            var(t, "param ", "SSL_CLIENT_VERIFY"),
            Some("SUCCESS"),
            "{t}"
        );
        assert_eq!(
            var(t, "param ", "SSL_CLIENT_S_DN"),
            Some(subject.as_str()),
            "{t}"
        );
    }
}

/// nginx `ssl_verify_client on` with `ssl_crl`: a revoked certificate, one
/// from a CA the block does not trust, and none at all end in the
/// handshake (RFC 8446 §4.4.2.4: the server aborts with an alert).
#[test]
fn a_revoked_a_foreign_and_a_missing_certificate_are_refused_in_the_handshake() {
    let dir = TempDir::new("clientauth-refused");
    let pki = Pki::make(&dir);
    let auth = format!(
        "{{ ca = {:?}, crl = {:?} }}",
        pki.path("ca.pem"),
        pki.path("crl.pem")
    );
    let s = site(&dir, &pki, &auth, "", "");
    for proto in PROTOCOLS {
        for who in [Some("mallory"), Some("eve"), None] {
            let g = curl(&s, &pki, "localhost", who, "/", &[proto]);
            assert!(!g.ok && g.status == 0, "{proto} {who:?}: {g:?}");
        }
        let g = curl(&s, &pki, "localhost", Some("alice"), "/", &[proto]);
        assert_eq!(g.status, 200, "{proto}: {g:?}");
    }
    // Each refusal is logged with its reason, at info (nginx: "client SSL
    // certificate verify error" at info).
    for reason in ["Revoked", "UnknownIssuer", "no certificates"] {
        assert!(
            s.wait_stderr(0, reason, std::time::Duration::from_secs(10))
                && s.stderr().contains("client certificate refused"),
            "{reason}: {}",
            s.stderr()
        );
    }
    // Without the CRL the same revoked certificate passes: the refusal
    // above was the CRL's.
    let dir2 = TempDir::new("clientauth-nocrl");
    let auth = format!("{{ ca = {:?} }}", pki.path("ca.pem"));
    let s2 = site(&dir2, &pki, &auth, "", "");
    let g = curl(&s2, &pki, "localhost", Some("mallory"), "/", &[]);
    assert_eq!(g.status, 200, "{g:?}");
}

/// nginx `ssl_verify_client optional`: a client without a certificate
/// comes in and CGI sees `SSL_CLIENT_VERIFY=NONE` (as mod_ssl sets it);
/// a certificate it does send must still verify; a route with
/// `require_client_cert` answers 403 without one (Apache `Require
/// ssl-verify-client`).
#[test]
fn optional_mode_lets_a_client_without_a_certificate_in_and_a_route_may_still_require_one() {
    let dir = TempDir::new("clientauth-optional");
    let pki = Pki::make(&dir);
    let auth = format!("{{ ca = {:?}, required = false }}", pki.path("ca.pem"));
    let s = site(&dir, &pki, &auth, "", "");
    for proto in PROTOCOLS {
        let g = curl(&s, &pki, "localhost", None, "/cgi-bin/env.sh", &[proto]);
        assert_eq!(g.status, 200, "{proto}: {g:?}");
        assert_eq!(
            var(&g.body, "", "SSL_CLIENT_VERIFY"),
            Some("NONE"),
            "{}",
            g.body
        );
        assert_eq!(var(&g.body, "", "SSL_CLIENT_S_DN"), None, "{}", g.body);

        let g = curl(&s, &pki, "localhost", None, "/secret/", &[proto]);
        assert_eq!(g.status, 403, "{proto}: {g:?}");
        let g = curl(&s, &pki, "localhost", Some("alice"), "/secret/", &[proto]);
        assert_eq!(g.status, 200, "{proto}: {g:?}");
        assert_eq!(g.body, "secret");

        let g = curl(&s, &pki, "localhost", Some("eve"), "/", &[proto]);
        assert!(
            !g.ok && g.status == 0,
            "{proto}: a foreign certificate: {g:?}"
        );
    }
}

/// nginx answers 421 when a request on a connection whose client
/// certificate was verified names another host than the SNI name
/// (`ssl_verify_client` with a Host that differs, RFC 9110 §15.5.20):
/// the certificate was checked against the CAs of the name asked for.
#[test]
fn a_request_for_another_host_than_the_verified_sni_name_gets_421() {
    let dir = TempDir::new("clientauth-421");
    let pki = Pki::make(&dir);
    let auth = format!("{{ ca = {:?} }}", pki.path("ca.pem"));
    let s = site(&dir, &pki, &auth, "", "");
    for proto in PROTOCOLS {
        let g = curl(&s, &pki, "a.test", Some("alice"), "/secret/", &[proto]);
        assert_eq!(g.status, 200, "{proto}: {g:?}");
        let g = curl(
            &s,
            &pki,
            "a.test",
            Some("alice"),
            "/secret/",
            &[proto, "-H", "Host: b.test"],
        );
        assert_eq!(g.status, 421, "{proto}: {g:?}");
        // Routes that ask for no certificate are not concerned.
        let g = curl(
            &s,
            &pki,
            "a.test",
            Some("alice"),
            "/",
            &[proto, "-H", "Host: b.test"],
        );
        assert_eq!(g.status, 200, "{proto}: {g:?}");
    }
}

/// nginx `proxy_set_header X-Client-DN $ssl_client_s_dn`: the
/// application trusts the field, so a client's own copy never arrives,
/// with a certificate or without one.
#[test]
fn the_proxy_passes_the_certificates_names_in_the_fields_the_route_names_and_strips_forged_ones() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("clientauth-proxy");
    let pki = Pki::make(&dir);
    let auth = format!("{{ ca = {:?}, required = false }}", pki.path("ca.pem"));
    let pool = format!(
        "[[pool]]\nname = \"echo\"\nprotocol = \"http\"\naddress = [\"{}\"]\n\n",
        b.addr
    );
    let route = "[[site.route]]\nprefix = \"/echo/\"\nproxy = { pool = \"echo\", \
                 header_up = { set = { \"X-Client-DN\" = \"$ssl_client_s_dn\", \
                 \"X-Client-Verify\" = \"$ssl_client_verify\", \
                 \"X-Client-Serial\" = \"$ssl_client_serial\", \
                 \"X-Client-Cert\" = \"$ssl_client_escaped_cert\" } } }\n\n";
    let s = site(&dir, &pki, &auth, &pool, route);
    let subject = pki.x509("alice", &["-subject", "-nameopt", "RFC2253"]);
    let forged = [
        "-H",
        "X-Client-DN: CN=admin",
        "-H",
        "X-Client-Verify: SUCCESS",
    ];
    for proto in PROTOCOLS {
        let mut args = vec![proto];
        args.extend(forged);
        let g = curl(&s, &pki, "localhost", Some("alice"), "/echo/x", &args);
        assert_eq!(g.status, 200, "{proto}: {g:?}");
        assert_eq!(
            field(&g.body, "x-client-dn"),
            vec![subject.clone()],
            "{proto}"
        );
        assert_eq!(
            field(&g.body, "x-client-verify"),
            vec!["SUCCESS"],
            "{proto}"
        );
        assert_eq!(field(&g.body, "x-client-serial"), vec!["1001"], "{proto}");
        let cert = field(&g.body, "x-client-cert");
        assert!(
            cert.len() == 1 && cert[0].starts_with("-----BEGIN%20CERTIFICATE-----%0A"),
            "{cert:?}"
        );

        let g = curl(&s, &pki, "localhost", None, "/echo/x", &args);
        assert_eq!(g.status, 200, "{proto}: {g:?}");
        assert!(
            field(&g.body, "x-client-dn").is_empty(),
            "{proto}: {}",
            g.body
        );
        assert_eq!(field(&g.body, "x-client-verify"), vec!["NONE"], "{proto}");
    }
}

/// The values of field `name` backend.py received.
fn field(body: &str, name: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(body).expect("echo JSON");
    v["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .filter(|h| h[0].as_str().is_some_and(|n| n.eq_ignore_ascii_case(name)))
        .map(|h| h[1].as_str().unwrap_or("").to_owned())
        .collect()
}

/// A `client_auth` whose CA file has no certificate, or whose CRL file
/// is not one, fails the start with the file's path, as nginx -t does.
#[test]
fn a_client_auth_without_a_usable_ca_or_crl_fails_the_start_naming_the_file() {
    let dir = TempDir::new("clientauth-bad");
    let pki = Pki::make(&dir);
    let empty = dir.write("empty.pem", "");
    for (auth, needle) in [
        (
            format!("{{ ca = {:?} }}", empty),
            "empty.pem: no CA certificate",
        ),
        (
            format!(
                "{{ ca = {:?}, crl = {:?} }}",
                pki.path("ca.pem"),
                pki.path("ca.pem")
            ),
            "ca.pem: no X509 CRL",
        ),
        (
            format!("{{ ca = {:?}, nope = 1 }}", pki.path("ca.pem")),
            "nope",
        ),
    ] {
        let cfg = dir.write(
            "bad.toml",
            format!(
                "[[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\n\
                 client_auth = {auth}\n\n[[site]]\nroot = \"www\"\n",
                pki.path("server/cert.pem").display(),
                pki.path("server/key.pem").display(),
            ),
        );
        let out = Command::new(stoa_bin())
            .arg("check")
            .arg(&cfg)
            .output()
            .expect("run stoa check");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(needle),
            "{auth}: {err}"
        );
    }
}

/// `openssl s_client` (client `who`) against `s`, with `args` (the TLS
/// version among them),
/// sending a GET of /secret/ and reading until the server closes: what it
/// printed.
fn s_client(s: &Server, pki: &Pki, who: &str, args: &[&str]) -> String {
    use std::io::Write;
    require("openssl", "openssl");
    let mut child = Command::new("timeout")
        .args(["10", "openssl", "s_client", "-ign_eof", "-connect"])
        .arg(format!("127.0.0.1:{}", s.addr.port()))
        .arg("-cert")
        .arg(pki.path(&format!("{who}.pem")))
        .arg("-key")
        .arg(pki.path(&format!("{who}.key")))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("openssl s_client");
    if let Some(mut i) = child.stdin.take() {
        // A server that closes first makes this fail: that is an outcome.
        let _ =
            i.write_all(b"GET /secret/ HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    }
    let out = child.wait_with_output().expect("openssl s_client");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// nginx re-reads `ssl_crl` on reload; here a CRL added by a reload
/// applies to new connections at once, and to sessions made before it:
/// rustls restores a resumed session's certificate without verifying it
/// again (and tickets outlive reloads), so Stoa checks it against the
/// block's verifier as it is now and closes a connection whose
/// certificate fails, before any request is read.
#[test]
fn a_crl_added_by_a_reload_refuses_the_revoked_client_and_its_earlier_session() {
    for (flag, version) in [("-tls1_2", "TLSv1.2"), ("-tls1_3", "TLSv1.3")] {
        crl_by_reload(flag, version);
    }
}

fn crl_by_reload(flag: &str, version: &str) {
    let dir = TempDir::new("clientauth-reload");
    let pki = Pki::make(&dir);
    let before = format!("{{ ca = {:?} }}", pki.path("ca.pem"));
    let s = site(&dir, &pki, &before, "", "");
    s.wait_for_handler(libc::SIGHUP);
    let sess = dir.join("session.pem").display().to_string();
    let first = s_client(&s, &pki, "mallory", &[flag, "-sess_out", &sess]);
    assert!(first.contains(&format!("New, {version}")), "{first}");
    assert!(first.contains("HTTP/1.1 200"), "{first}");
    let again = s_client(&s, &pki, "mallory", &[flag, "-sess_in", &sess]);
    assert!(again.contains(&format!("Reused, {version}")), "{again}");
    assert!(again.contains("HTTP/1.1 200"), "{again}");

    let cfg = dir.join("stoa.toml");
    let text = std::fs::read_to_string(&cfg).expect("read");
    let after = format!(
        "{{ ca = {:?}, crl = {:?} }}",
        pki.path("ca.pem"),
        pki.path("crl.pem")
    );
    std::fs::write(&cfg, text.replace(&before, &after)).expect("write");
    let from = s.stderr().len();
    s.signal(libc::SIGHUP);
    assert!(
        s.wait_stderr(from, "reloaded", std::time::Duration::from_secs(10)),
        "{}",
        s.stderr()
    );
    let resumed = s_client(&s, &pki, "mallory", &[flag, "-sess_in", &sess]);
    assert!(!resumed.contains("HTTP/1.1"), "{version}: {resumed}");
    let fresh = s_client(&s, &pki, "mallory", &[flag]);
    assert!(
        fresh.contains("alert certificate revoked") && !fresh.contains("HTTP/1.1"),
        "{version}: {fresh}"
    );
    let g = curl(&s, &pki, "localhost", Some("mallory"), "/", &[]);
    assert!(!g.ok && g.status == 0, "{g:?}");
    let g = curl(&s, &pki, "localhost", Some("alice"), "/", &[]);
    assert_eq!(g.status, 200, "{g:?}");
}

/// nginx's master reads `ssl_client_certificate` and `ssl_crl` as root;
/// here the privileged parent reads `ca` and `crl` (0600, root's) at start
/// and at a reload for a server that runs as `nobody` (the default user).
#[test]
fn the_ca_and_crl_are_read_as_root_for_a_server_that_runs_as_nobody_at_start_and_reload() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("clientauth-nobody");
    let pki = Pki::make(&dir);
    for f in ["ca.pem", "crl.pem"] {
        std::fs::set_permissions(pki.path(f), std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
    }
    let before = format!("{{ ca = {:?} }}", pki.path("ca.pem"));
    let cfg = site_config(&dir, &pki, &before, "", "");
    let text = std::fs::read_to_string(&cfg).expect("read");
    let text = text.replace("user = \"root\"\n", "");
    std::fs::write(&cfg, &text).expect("write");
    let s = Server::with_config(&cfg);
    s.wait_for_handler(libc::SIGHUP);
    let g = curl(&s, &pki, "localhost", Some("alice"), "/secret/", &[]);
    assert_eq!((g.status, g.body.as_str()), (200, "secret"), "{g:?}");
    let g = curl(&s, &pki, "localhost", Some("mallory"), "/secret/", &[]);
    assert_eq!(g.status, 200, "no CRL yet: {g:?}");

    let after = format!(
        "{{ ca = {:?}, crl = {:?} }}",
        pki.path("ca.pem"),
        pki.path("crl.pem")
    );
    std::fs::write(&cfg, text.replace(&before, &after)).expect("write");
    let from = s.stderr().len();
    s.signal(libc::SIGHUP);
    assert!(
        s.wait_stderr(from, "reloaded", std::time::Duration::from_secs(10)),
        "{}",
        s.stderr()
    );
    let g = curl(&s, &pki, "localhost", Some("mallory"), "/secret/", &[]);
    assert!(!g.ok && g.status == 0, "{g:?}");
    let g = curl(&s, &pki, "localhost", Some("alice"), "/secret/", &[]);
    assert_eq!(g.status, 200, "{g:?}");
}

/// `stoa check` warns (and still accepts the file) when a route requires
/// a client certificate but no `[[tls]]` block asks for one: every such
/// request would get 403.
#[test]
fn check_warns_when_a_route_requires_a_certificate_no_tls_block_asks_for() {
    let dir = TempDir::new("clientauth-check");
    dir.mkdir("www");
    let cfg = dir.write(
        "stoa.toml",
        "listen = [\"127.0.0.1:0\"]\n\n[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/admin/\"\nrequire_client_cert = true\nstatic = {}\n",
    );
    let out = Command::new(stoa_bin())
        .arg("check")
        .arg(&cfg)
        .output()
        .expect("run stoa check");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning:") && err.contains("no [[tls]] block has `client_auth`"),
        "{err}"
    );
}
