//! Automatic HTTPS (RFC 8555) end to end against Pebble, the ACME server
//! Let's Encrypt publishes for testing, with real validation (no
//! PEBBLE_VA_ALWAYS_VALID): pebble-challtestsrv answers every name with
//! 127.0.0.1 and Pebble validates on the ports Stoa listens on
//! (`httpPort`, `tlsPort`). Certificates by HTTP-01 (with
//! `https_redirect` on) and by TLS-ALPN-01 (RFC 8737), verified by curl
//! against Pebble's root from its management API; renewal of a
//! short-lived certificate (with ARI, RFC 9773) while a connection stays
//! open; Pebble stopped during a renewal; two instances on one storage.
//!
//! Needs pebble and pebble-challtestsrv (`go install
//! github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3`, test.sh does it),
//! curl and openssl. Ports: 18700-18719, five per test.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PEBBLE_VERSION: &str = "v2.10.3";

/// Where `go install` put a Go tool, or PATH.
fn go_tool(name: &str) -> PathBuf {
    let mut places: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Ok(out) = Command::new("go").args(["env", "GOPATH"]).output() {
        let gopath = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !gopath.is_empty() {
            places.push(Path::new(&gopath).join("bin"));
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        places.push(Path::new(&home).join("go/bin"));
    }
    places
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} is missing: go install github.com/letsencrypt/pebble/v2/cmd/{name}@{PEBBLE_VERSION} (test.sh does it)"
            )
        })
}

/// Pebble's own test certificates (its HTTPS listener's, and the minica
/// root that signed them), from the module `go install` fetched.
fn pebble_certs() -> PathBuf {
    let mut roots = Vec::new();
    if let Ok(out) = Command::new("go").args(["env", "GOMODCACHE"]).output() {
        let d = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !d.is_empty() {
            roots.push(PathBuf::from(d));
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        roots.push(Path::new(&home).join("go/pkg/mod"));
    }
    roots
        .into_iter()
        .map(|r| {
            r.join(format!(
                "github.com/letsencrypt/pebble/v2@{PEBBLE_VERSION}/test/certs"
            ))
        })
        .find(|d| d.join("pebble.minica.pem").is_file())
        .expect("Pebble's module (test/certs) is missing: go install github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3")
}

/// A child whose output is collected into a string as it comes.
struct Proc {
    child: Child,
    out: Arc<Mutex<String>>,
}

impl Proc {
    fn spawn(cmd: &mut Command) -> Proc {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let out = Arc::new(Mutex::new(String::new()));
        for pipe in [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let out = out.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(pipe);
                let mut line = String::new();
                while matches!(r.read_line(&mut line), Ok(n) if n > 0) {
                    if let Ok(mut o) = out.lock() {
                        o.push_str(&line);
                    }
                    line.clear();
                }
            });
        }
        Proc { child, out }
    }

    fn text(&self) -> String {
        self.out.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn wait_for(&self, needle: &str, within: Duration) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if self.text().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Pebble and its DNS server on five consecutive ports from `base`:
/// directory, management, DNS, and the HTTP-01 and TLS-ALPN-01 ports it
/// validates on (where Stoa listens).
struct Pebble {
    pebble: Proc,
    _dns: Proc,
    dir: TempDir,
    base: u16,
}

impl Pebble {
    fn start(base: u16, validity_secs: u64) -> Pebble {
        require("curl", "curl");
        require("openssl", "openssl");
        let certs = pebble_certs();
        let dir = TempDir::new("pebble");
        let config = dir.write(
            "pebble.json",
            format!(
                r#"{{"pebble": {{
  "listenAddress": "127.0.0.1:{}",
  "managementListenAddress": "127.0.0.1:{}",
  "certificate": "{}",
  "privateKey": "{}",
  "httpPort": {},
  "tlsPort": {},
  "ocspResponderURL": "",
  "externalAccountBindingRequired": false,
  "retryAfter": {{ "authz": 1, "order": 1 }},
  "keyAlgorithm": "ecdsa",
  "profiles": {{ "default": {{ "description": "short", "validityPeriod": {validity_secs} }} }}
}}}}"#,
                base,
                base + 1,
                certs.join("localhost/cert.pem").display(),
                certs.join("localhost/key.pem").display(),
                base + 3,
                base + 4,
            ),
        );
        let dns_addr = format!("127.0.0.1:{}", base + 2);
        let dns = Proc::spawn(Command::new(go_tool("pebble-challtestsrv")).args([
            "-defaultIPv4",
            "127.0.0.1",
            "-defaultIPv6",
            "",
            "-dnsserver",
            &dns_addr,
            "-http01",
            "",
            "-https01",
            "",
            "-tlsalpn01",
            "",
            "-doh",
            "",
            // Its management API is not used; it must bind somewhere.
            "-management",
            "127.0.0.1:0",
        ]));
        assert!(
            dns.wait_for("Starting challenge servers", Duration::from_secs(20)),
            "pebble-challtestsrv did not start: {}",
            dns.text()
        );
        let pebble = Proc::spawn(
            Command::new(go_tool("pebble"))
                .arg("-config")
                .arg(&config)
                .args(["-dnsserver", &dns_addr])
                // Real validation, without Pebble's random sleeps, and
                // without its rejection of 5 % of good nonces (instant-acme
                // retries a badNonce three times: 1 in 8,000 requests would
                // still fail, too often for a test that must not flake).
                .env("PEBBLE_VA_NOSLEEP", "1")
                .env("PEBBLE_WFE_NONCEREJECT", "0")
                // Every order validated anew, renewals included.
                .env("PEBBLE_AUTHZREUSE", "0")
                .env_remove("PEBBLE_VA_ALWAYS_VALID"),
        );
        assert!(
            pebble.wait_for("ACME directory available", Duration::from_secs(20)),
            "pebble did not start: {}",
            pebble.text()
        );
        Pebble {
            pebble,
            _dns: dns,
            dir,
            base,
        }
    }

    fn directory(&self) -> String {
        format!("https://127.0.0.1:{}/dir", self.base)
    }

    fn minica(&self) -> PathBuf {
        pebble_certs().join("pebble.minica.pem")
    }

    fn http_port(&self) -> u16 {
        self.base + 3
    }

    fn tls_port(&self) -> u16 {
        self.base + 4
    }

    /// The root that issues this Pebble's certificates (a new one each
    /// start), from the management API.
    fn root(&self) -> PathBuf {
        let path = self.dir.join("root.pem");
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--max-time", "10", "--cacert"])
            .arg(self.minica())
            .arg(format!("https://127.0.0.1:{}/roots/0", self.base + 1))
            .arg("-o")
            .arg(&path)
            .output()
            .expect("run curl");
        assert!(out.status.success(), "Pebble's root: {out:?}");
        path
    }
}

/// A config serving `site` with one `[[tls]]` block under ACME.
fn config(
    dir: &TempDir,
    pebble: &Pebble,
    listen: &str,
    tls_listen: &str,
    challenges: &str,
    storage: &Path,
) -> PathBuf {
    dir.write("site/hello.txt", "hello\n");
    let listen = if listen.is_empty() {
        String::new()
    } else {
        format!("listen = [\"{listen}\"]\n")
    };
    // Not `TempDir::config`: no `user = "root"`. Started as root, the
    // ordering runs in the server process as nobody, in storage the
    // privileged parent made for it.
    dir.write(
        "stoa.toml",
        format!(
            "{listen}workers = 1\n\
             [log]\naccess = \"off\"\n\
             [limits]\nkeepalive_timeout = \"5m\"\n\
             [[tls]]\nlisten = [\"{tls_listen}\"]\nhosts = [\"a.test\"]\n\
             acme = {{ directory = \"{}\", directory_ca = \"{}\", storage = \"{}\", challenges = [{challenges}], email = \"ops@a.test\" }}\n\
             [[site]]\nroot = \"{}\"\nhttps_redirect = true\n\
             [[site.route]]\nprefix = \"/stoa-status\"\nstatus = {{}}\n",
            pebble.directory(),
            pebble.minica().display(),
            storage.display(),
            dir.join("site").display(),
        ),
    )
}

/// curl over HTTPS to `a.test` on `port`, trusting only `root`: the body,
/// or curl's complaint.
fn curl_verified(port: u16, root: &Path, path: &str) -> Result<String, String> {
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "10", "--resolve"])
        .arg(format!("a.test:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(root)
        .arg(format!("https://a.test:{port}{path}"))
        .output()
        .expect("run curl");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The serial of the certificate served for `a.test` on `port` (no
/// verification: an expired one is still named).
fn served_serial(port: u16) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect 127.0.0.1:{port} -servername a.test </dev/null 2>/dev/null | openssl x509 -noout -serial"
        ))
        .output()
        .expect("run openssl");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The status page, plain text, over TLS on `port` (cleartext requests
/// are redirected), whatever certificate is served.
fn status_page(port: u16) -> String {
    let out = Command::new("curl")
        .args(["-sS", "-k", "--max-time", "10", "--resolve"])
        .arg(format!("a.test:{port}:127.0.0.1"))
        .arg(format!("https://a.test:{port}/stoa-status"))
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How many times the server logged `needle`.
fn count(server: &Server, needle: &str) -> usize {
    server.stderr().matches(needle).count()
}

/// Waits until the server has logged `needle` `n` times.
fn wait_count(server: &Server, needle: &str, n: usize, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if count(server, needle) >= n {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

const ISSUED: &str = "ACME: new certificate for a.test";

#[test]
fn http01_gets_a_certificate_at_start_that_curl_verifies_with_pebbles_root_rfc8555_8_3() {
    let pebble = Pebble::start(18700, 3600);
    let dir = TempDir::new("acme-http01");
    let cfg = config(
        &dir,
        &pebble,
        &format!("127.0.0.1:{}", pebble.http_port()),
        &format!("127.0.0.1:{}", pebble.tls_port()),
        "\"http-01\"",
        &dir.join("storage"),
    );
    let mut server = Server::with_config(&cfg);
    assert!(
        server.wait_stderr(0, ISSUED, Duration::from_secs(60)),
        "no certificate: {}\npebble: {}",
        server.stderr(),
        pebble.pebble.text()
    );
    // Validated over http although the site redirects cleartext requests.
    assert!(server.stderr().contains("answering Http01 for a.test"));
    assert_eq!(server.get("/hello.txt").status, 308);
    let root = pebble.root();
    assert_eq!(
        curl_verified(pebble.tls_port(), &root, "/hello.txt").as_deref(),
        Ok("hello\n")
    );
    // The status page: what is served, and the attempt's outcome (set
    // just after the certificate is served, so waited for).
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let page = status_page(pebble.tls_port());
        let line = page
            .lines()
            .find(|l| l.starts_with("acme a.test ("))
            .unwrap_or("");
        if line.contains("issued certificate") && line.ends_with(" ok") {
            assert!(line.contains("expires "), "{line}");
            break;
        }
        assert!(Instant::now() < until, "{page}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let json = Command::new("curl")
        .args(["-sS", "-k", "--max-time", "10"])
        .arg(format!(
            "https://127.0.0.1:{}/stoa-status?format=json",
            pebble.tls_port()
        ))
        .output()
        .expect("run curl");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("status JSON");
    assert_eq!(v["acme"][0]["hosts"][0], "a.test", "{v}");
    assert_eq!(v["acme"][0]["certificate"], "issued", "{v}");
    assert_eq!(v["acme"][0]["last_outcome"], "ok", "{v}");
    assert!(v["acme"][0]["expires"].is_string(), "{v}");
    // Account and certificate are in storage, the keys private.
    let store = dir.join("storage/127.0.0.1-18700-dir");
    assert!(store.join("account.json").is_file());
    assert!(store.join("a.test/cert.pem").is_file());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(store.join("a.test/key.pem"))
        .expect("key.pem")
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "key.pem mode {mode:o}");
    // Started as root, the server process orders as `user` (nobody):
    // the parent made the storage for it.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        use std::os::unix::fs::MetadataExt;
        let owner = std::fs::metadata(store.join("a.test/cert.pem"))
            .expect("cert.pem")
            .uid();
        assert_eq!(owner, account_uid("nobody"));
    }

    // A reload keeps the certificate in service and orders nothing.
    let mark = server.stderr().len();
    server.signal(libc::SIGHUP);
    assert!(
        server.wait_stderr(mark, "reloaded", Duration::from_secs(20)),
        "{}",
        server.stderr()
    );
    assert_eq!(
        curl_verified(pebble.tls_port(), &root, "/hello.txt").as_deref(),
        Ok("hello\n")
    );
    assert_eq!(count(&server, "ordering a certificate"), 1);

    // A restart serves the stored certificate at once: no order. (Stopped
    // whole first: its ports are taken again.)
    server.signal(libc::SIGTERM);
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
    let server = Server::with_config(&cfg);
    assert_eq!(
        curl_verified(pebble.tls_port(), &root, "/hello.txt").as_deref(),
        Ok("hello\n")
    );
    assert!(!server.stderr().contains("ordering a certificate"));
    assert!(status_page(pebble.tls_port()).contains("stored certificate"));
}

#[test]
fn tls_alpn01_gets_a_certificate_on_the_tls_listener_rfc8737() {
    let pebble = Pebble::start(18705, 3600);
    let dir = TempDir::new("acme-alpn");
    // No cleartext listener at all: only TLS-ALPN-01 can succeed.
    let cfg = config(
        &dir,
        &pebble,
        "",
        &format!("127.0.0.1:{}", pebble.tls_port()),
        "\"tls-alpn-01\"",
        &dir.join("storage"),
    );
    let server = Server::with_config(&cfg);
    assert!(
        server.wait_stderr(0, ISSUED, Duration::from_secs(60)),
        "no certificate: {}\npebble: {}",
        server.stderr(),
        pebble.pebble.text()
    );
    assert!(server.stderr().contains("answering TlsAlpn01 for a.test"));
    let root = pebble.root();
    assert_eq!(
        curl_verified(pebble.tls_port(), &root, "/hello.txt").as_deref(),
        Ok("hello\n")
    );
    // Without a challenge out, `acme-tls/1` alone is refused (RFC 8737
    // §4: only the challenge answers that protocol).
    let out = Command::new("openssl")
        .args(["s_client", "-connect"])
        .arg(format!("127.0.0.1:{}", pebble.tls_port()))
        .args(["-servername", "a.test", "-alpn", "acme-tls/1"])
        .stdin(Stdio::null())
        .output()
        .expect("run openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("ALPN protocol: acme-tls/1"), "{text}");
}

/// `openssl s_client` kept open: one TLS connection to send requests on.
struct Held {
    child: Child,
    stdin: ChildStdin,
    out: Arc<Mutex<String>>,
}

impl Held {
    fn open(port: u16) -> Held {
        let mut child = Command::new("openssl")
            .args(["s_client", "-quiet", "-connect"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["-servername", "a.test"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run openssl s_client");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = child.stdout.take().expect("stdout");
        let out = Arc::new(Mutex::new(String::new()));
        let o = out.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = o.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
        Held { child, stdin, out }
    }

    /// Sends a GET and waits for the `n`th "hello" body on this connection.
    fn get(&mut self, n: usize) -> bool {
        let req = "GET /hello.txt HTTP/1.1\r\nHost: a.test\r\n\r\n";
        if self.stdin.write_all(req.as_bytes()).is_err() || self.stdin.flush().is_err() {
            return false;
        }
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            let seen = self
                .out
                .lock()
                .map(|s| s.matches("hello\n").count())
                .unwrap_or(0);
            if seen >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_short_lived_certificate_renews_under_an_open_connection_and_survives_pebble_stopping_rfc9773()
{
    // 30-second certificates: renewed between 10 s and 27 s into their
    // life (ARI's window, kept out of the first third and last tenth).
    let mut pebble = Pebble::start(18710, 30);
    let dir = TempDir::new("acme-renew");
    let cfg = config(
        &dir,
        &pebble,
        &format!("127.0.0.1:{}", pebble.http_port()),
        &format!("127.0.0.1:{}", pebble.tls_port()),
        "\"http-01\", \"tls-alpn-01\"",
        &dir.join("storage"),
    );
    let server = Server::with_config(&cfg);
    assert!(
        wait_count(&server, ISSUED, 1, Duration::from_secs(60)),
        "no certificate: {}",
        server.stderr()
    );
    let first = served_serial(pebble.tls_port());
    assert!(first.starts_with("serial="), "{first}");
    let mut conn = Held::open(pebble.tls_port());
    assert!(conn.get(1), "first request on the held connection");

    assert!(
        wait_count(&server, ISSUED, 2, Duration::from_secs(60)),
        "no renewal: {}\npebble: {}",
        server.stderr(),
        pebble.pebble.text()
    );
    // The renewal replaced the old certificate (RFC 9773 §5).
    assert!(
        pebble.pebble.text().contains("is a replacement of"),
        "{}",
        pebble.pebble.text()
    );
    // Validated again (no authorization reused), while the connection
    // held its certificate.
    assert_eq!(count(&server, "ACME: answering Http01 for a.test"), 2);
    let second = served_serial(pebble.tls_port());
    assert_ne!(first, second, "a new connection gets the new certificate");
    assert!(
        conn.get(2),
        "the connection open across the renewal still answers"
    );

    // Pebble stops: the next renewal fails, is logged and shown, and the
    // certificate in hand stays in service.
    pebble.pebble.stop();
    assert!(
        server.wait_stderr(
            0,
            "the certificate in service stays",
            Duration::from_secs(60)
        ),
        "{}",
        server.stderr()
    );
    assert_eq!(served_serial(pebble.tls_port()), second);
    assert!(conn.get(3));
    let page = status_page(pebble.tls_port());
    assert!(page.contains("failed: "), "{page}");
}

#[test]
fn two_instances_on_one_storage_order_a_certificate_once() {
    let pebble = Pebble::start(18715, 3600);
    let dir_a = TempDir::new("acme-two-a");
    let dir_b = TempDir::new("acme-two-b");
    let storage = dir_a.join("storage");
    let cfg_a = config(
        &dir_a,
        &pebble,
        &format!("127.0.0.1:{}", pebble.http_port()),
        &format!("127.0.0.1:{}", pebble.tls_port()),
        "\"http-01\"",
        &storage,
    );
    // B listens elsewhere: Pebble could not validate it, so a
    // certificate it serves can only be A's.
    let cfg_b = config(
        &dir_b,
        &pebble,
        "127.0.0.1:0",
        "127.0.0.1:0",
        "\"http-01\"",
        &storage,
    );
    let a = Server::with_config(&cfg_a);
    assert!(
        a.wait_stderr(0, "ACME: ordering a certificate", Duration::from_secs(30)),
        "{}",
        a.stderr()
    );
    let b = Server::with_config(&cfg_b);
    assert!(b.wait_stderr(0, "listening on https://", Duration::from_secs(10)));
    let b_tls = b
        .stderr()
        .split("listening on https://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
        .expect("B's TLS address")
        .port();
    assert!(
        a.wait_stderr(0, ISSUED, Duration::from_secs(60)),
        "{}",
        a.stderr()
    );
    // B either waited on the lock and took A's certificate, or started
    // after it was stored and served it from storage.
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let page = status_page(b_tls);
        if page.contains("issued certificate") || page.contains("stored certificate") {
            break;
        }
        assert!(
            Instant::now() < until,
            "B has no certificate: {page}\n{}",
            b.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !b.stderr().contains("ordering a certificate"),
        "{}",
        b.stderr()
    );
    assert_eq!(
        pebble
            .pebble
            .text()
            .matches("Issued certificate serial")
            .count(),
        1,
        "{}",
        pebble.pebble.text()
    );
    assert_eq!(served_serial(b_tls), served_serial(pebble.tls_port()));
    let root = pebble.root();
    assert_eq!(
        curl_verified(b_tls, &root, "/hello.txt").as_deref(),
        Ok("hello\n")
    );
}

#[test]
fn an_unreachable_directory_leaves_a_temporary_certificate_and_a_shown_failure_until_a_reload_drops_acme(
) {
    require("openssl", "openssl");
    let dir = TempDir::new("acme-down");
    dir.write("site/hello.txt", "hello\n");
    // Port 1 of loopback: nothing listens, the connection is refused.
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "workers = 1\n[log]\naccess = \"off\"\n\
             [[tls]]\nlisten = [\"127.0.0.1:0\"]\nhosts = [\"a.test\"]\n\
             acme = {{ directory = \"https://127.0.0.1:1/dir\", storage = \"{}\" }}\n\
             [[site]]\nroot = \"{}\"\n\
             [[site.route]]\nprefix = \"/stoa-status\"\nstatus = {{}}\n",
            dir.join("storage").display(),
            dir.join("site").display(),
        ),
    );
    let server = Server::with_config(&cfg);
    assert!(
        server.wait_stderr(
            0,
            "the certificate in service stays",
            Duration::from_secs(30)
        ),
        "{}",
        server.stderr()
    );
    // Served meanwhile: a self-signed certificate for the host.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {} -servername a.test </dev/null 2>/dev/null | openssl x509 -noout -ext subjectAltName -issuer -subject",
            server.addr
        ))
        .output()
        .expect("run openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("DNS:a.test"), "{text}");
    let page = status_page(server.addr.port());
    let line = page
        .lines()
        .find(|l| l.starts_with("acme a.test ("))
        .unwrap_or("");
    assert!(line.contains("temporary certificate"), "{page}");
    assert!(line.contains("failed: "), "{page}");
    let prom = Command::new("curl")
        .args(["-sS", "-k", "--max-time", "10"])
        .arg(format!(
            "https://{}/stoa-status?format=prometheus",
            server.addr
        ))
        .output()
        .expect("run curl");
    let prom = String::from_utf8_lossy(&prom.stdout);
    assert!(
        prom.contains("stoa_acme_last_attempt_failed{hosts=\"a.test\"} 1"),
        "{prom}"
    );
    assert!(
        prom.contains("stoa_acme_certificate_expiry_timestamp_seconds{hosts=\"a.test\"} 0"),
        "{prom}"
    );

    // A reload without `acme` ends the manager at once (it was waiting
    // out a minute's back-off), and the status page drops the line.
    std::fs::write(
        &cfg,
        format!(
            "workers = 1\n[log]\naccess = \"off\"\n\
             [[tls]]\nlisten = [\"127.0.0.1:0\"]\nhosts = [\"a.test\"]\n\
             cert = \"{}\"\nkey = \"{}\"\nself_signed = true\n\
             [[site]]\nroot = \"{}\"\n\
             [[site.route]]\nprefix = \"/stoa-status\"\nstatus = {{}}\n",
            dir.join("self/cert.pem").display(),
            dir.join("self/key.pem").display(),
            dir.join("site").display(),
        ),
    )
    .expect("rewrite the config");
    let mark = server.stderr().len();
    server.signal(libc::SIGHUP);
    assert!(
        server.wait_stderr(
            mark,
            "a.test is no longer configured",
            Duration::from_secs(20)
        ),
        "{}",
        server.stderr()
    );
    assert!(!status_page(server.addr.port()).contains("acme a.test"));
}
