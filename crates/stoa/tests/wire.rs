//! What arrives before HTTP: the PROXY protocol from a load balancer in
//! front (HAProxy's proxy-protocol.txt, HAProxy itself with
//! `send-proxy-v2` as the real peer; nginx's `listen ... proxy_protocol`
//! with `set_real_ip_from`), and Unix-domain socket listeners (nginx's
//! `listen unix:PATH`) served to curl `--unix-socket`.
//!
//! Needs the Debian packages haproxy and curl; a missing one fails the
//! test that needs it with a message naming the package.

mod common;
use common::*;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A CGI script that answers with the client address it was given.
const ADDR_SCRIPT: &str =
    "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n%s %s\\n' \"$REMOTE_ADDR\" \"$REMOTE_PORT\"\n";

fn require(cmd: &str, package: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "`{cmd}` not found: install the Debian package {package}"
    );
}

/// A site with `cgi-bin/addr` and the given top of the config (`listen`
/// and the wire's sections); access log to `access.log`.
fn site(tag: &str, top: &str, extra: &str) -> (TempDir, Server) {
    site_as(tag, "root", top, extra)
}

/// As `site`, serving as `user` (started as root with another user: a
/// root parent and a server process that is the user); `cgi-bin/uid`
/// answers with the uid its script runs as.
fn site_as(tag: &str, user: &str, top: &str, extra: &str) -> (TempDir, Server) {
    let d = TempDir::new(tag);
    d.write("www/a.txt", "alpha\n");
    let script = d.write("cgi-bin/addr", ADDR_SCRIPT);
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let script = d.write(
        "cgi-bin/uid",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n%s\\n' \"$(id -u)\"\n",
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cfg = d.write(
        "stoa.toml",
        format!(
            "{top}\nworkers = 1\nuser = \"{user}\"\n\n[log]\naccess = \"access.log\"\n\n{extra}\n\
             [[site]]\nroot = \"www\"\n\n[[site.route]]\nprefix = \"/cgi-bin/\"\n\
             cgi = {{ dir = \"cgi-bin\" }}\n\n[[site.route]]\nprefix = \"/status\"\n\
             status = {{ allow = [\"203.0.113.0/24\"] }}\n"
        ),
    );
    let s = Server::with_config(&cfg);
    (d, s)
}

/// The port of a listener the server printed for `scheme`.
fn printed_addr(s: &Server, scheme: &str) -> std::net::SocketAddr {
    let needle = format!("listening on {scheme}://");
    s.wait_stderr(0, &needle, Duration::from_secs(5));
    s.stderr()
        .lines()
        .find_map(|l| l.split(&needle).nth(1))
        .and_then(|a| a.trim().trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("no {scheme} listener in:\n{}", s.stderr()))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// HAProxy in TCP mode in front of `backend` (`127.0.0.1:PORT` or an
/// absolute Unix socket path), sending PROXY v2 and connecting from
/// 127.0.0.1; returns it and the port it listens on.
struct Haproxy {
    child: Child,
    port: u16,
}

impl Haproxy {
    fn start(d: &TempDir, name: &str, backend: &str) -> Haproxy {
        require("haproxy", "haproxy");
        let port = free_port();
        let source = if backend.starts_with('/') {
            ""
        } else {
            " source 127.0.0.1"
        };
        let cfg = d.write(
            &format!("{name}.cfg"),
            format!(
                "global\n    maxconn 64\ndefaults\n    mode tcp\n    timeout connect 5s\n\
                 timeout client 30s\n    timeout server 30s\nfrontend fe\n\
                 \x20   bind 127.0.0.1:{port}\n    default_backend be\nbackend be\n\
                 \x20   server s {backend} send-proxy-v2{source}\n"
            ),
        );
        let child = Command::new("haproxy")
            .args(["-db", "-f"])
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start haproxy");
        let h = Haproxy { child, port };
        let until = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < until, "haproxy did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        h
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn curl(args: &[&str]) -> Output {
    require("curl", "curl");
    Command::new("curl")
        .args(["-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("run curl")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Waits until the access log `file` satisfies `done`, and returns it
/// (the log is written once a second).
fn wait_file(file: &Path, done: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let t = std::fs::read_to_string(file).unwrap_or_default();
        if done(&t) || Instant::now() >= until {
            return t;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// HAProxy's `send-proxy-v2` (proxy-protocol.txt §2.2) in front of a
/// plain, a TLS and a Unix-socket listener: the CGI script sees the
/// address HAProxy received the connection from (127.0.0.2), not
/// HAProxy's own (127.0.0.1), as nginx's `set_real_ip_from` gives
/// `$remote_addr`; over TLS the header precedes the ClientHello.
#[test]
fn behind_haproxy_send_proxy_v2_cgi_sees_the_real_client_address_proxy_protocol_2_2() {
    let d0 = TempDir::new("wire-pp-certs");
    let o = Command::new(stoa_bin())
        .args(["cert"])
        .arg(d0.path())
        .output()
        .expect("stoa cert");
    assert!(o.status.success());
    let sock = d0.join("pp.sock");
    let top = format!("listen = [\"127.0.0.1:0\", \"unix:{}\"]", sock.display());
    let extra = format!(
        "[proxy_protocol]\nlisten = [\"127.0.0.1:0\", \"unix:{}\"]\ntrusted_proxies = [\"127.0.0.1\"]\n\n\
         [[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\n",
        sock.display(),
        d0.join("cert.pem").display(),
        d0.join("key.pem").display()
    );
    let (d, s) = site("wire-pp-haproxy", &top, &extra);
    let plain = printed_addr(&s, "http");
    let tls = printed_addr(&s, "https");
    let ha_plain = Haproxy::start(&d, "plain", &plain.to_string());
    let ha_tls = Haproxy::start(&d, "tls", &tls.to_string());
    let ha_unix = Haproxy::start(&d, "unix", &sock.display().to_string());
    for (what, url) in [
        (
            "plain",
            format!("http://127.0.0.1:{}/cgi-bin/addr", ha_plain.port),
        ),
        (
            "tls",
            format!("https://127.0.0.1:{}/cgi-bin/addr", ha_tls.port),
        ),
        (
            "unix",
            format!("http://127.0.0.1:{}/cgi-bin/addr", ha_unix.port),
        ),
    ] {
        let o = curl(&["-k", "--interface", "127.0.0.2", &url]);
        let out = stdout(&o);
        assert!(
            o.status.success(),
            "{what}: {out} {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mut f = out.split_whitespace();
        assert_eq!(f.next(), Some("127.0.0.2"), "{what}: {out}");
        let port: u16 = f.next().and_then(|p| p.parse().ok()).expect("REMOTE_PORT");
        assert_ne!(port, 0, "{what}");
    }
    // The access log names the client, not the balancer.
    let log = wait_file(&d.join("access.log"), |t| {
        t.lines().filter(|l| l.starts_with("127.0.0.2 ")).count() >= 3
    });
    assert_eq!(
        log.lines().filter(|l| l.starts_with("127.0.0.2 ")).count(),
        3,
        "{log}"
    );
}

/// A PROXY header from an address outside `trusted_proxies` is refused:
/// the connection closes without an answer (nginx refuses to take
/// `set_real_ip_from` from anyone else), and the log says why, once.
#[test]
fn a_proxy_header_from_an_untrusted_address_is_refused_and_logged_once() {
    let (d, s) = site(
        "wire-pp-untrusted",
        "listen = [\"127.0.0.1:0\"]",
        "[proxy_protocol]\nlisten = [\"127.0.0.1:0\"]\ntrusted_proxies = [\"127.0.0.9\"]\n",
    );
    let ha = Haproxy::start(&d, "ha", &s.addr.to_string());
    for _ in 0..3 {
        let o = curl(&[
            "--interface",
            "127.0.0.2",
            &format!("http://127.0.0.1:{}/cgi-bin/addr", ha.port),
        ]);
        assert!(!o.status.success(), "served: {}", stdout(&o));
        assert!(!stdout(&o).contains("127.0.0.2"));
    }
    // A raw client with a header of its own, from 127.0.0.1: refused too.
    let mut c = s.connect();
    c.send(b"PROXY TCP4 203.0.113.9 127.0.0.1 5555 80\r\nGET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let (_, bytes) = c
        .wait_closed(Duration::from_secs(3))
        .expect("the connection must be closed");
    assert!(bytes.is_empty(), "{:?}", String::from_utf8_lossy(&bytes));
    assert!(s.wait_stderr(0, "not in `trusted_proxies`", Duration::from_secs(3)));
    assert_eq!(
        s.stderr().matches("not in `trusted_proxies`").count(),
        1,
        "{}",
        s.stderr()
    );
}

/// PROXY v1 (§2.1) from a raw client: the header's address is the
/// client's for CGI (REMOTE_ADDR, REMOTE_PORT), the access log and the
/// status page's `allow`; a LOCAL/UNKNOWN header keeps the connection's
/// own address; a listener that expects the header closes a connection
/// without one.
#[test]
fn a_v1_header_from_a_raw_client_replaces_the_peer_everywhere_proxy_protocol_2_1() {
    let (d, s) = site(
        "wire-pp-v1",
        "listen = [\"127.0.0.1:0\"]",
        "[proxy_protocol]\nlisten = [\"127.0.0.1:0\"]\ntrusted_proxies = [\"127.0.0.1/32\"]\n",
    );
    let header = b"PROXY TCP4 203.0.113.9 127.0.0.1 5555 80\r\n";
    let mut c = s.connect();
    c.send(header);
    let r = c.request(&get("/cgi-bin/addr"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text(), "203.0.113.9 5555\n");
    // The same connection goes on: the header came once, at its start.
    assert_eq!(c.request(&get("/status")).status, 200);
    // UNKNOWN: the connection's own address (127.0.0.1), not allowed.
    let mut c = s.connect();
    c.send(b"PROXY UNKNOWN\r\n");
    let r = c.request(&get("/cgi-bin/addr"));
    assert!(r.text().starts_with("127.0.0.1 "), "{r:?}");
    assert_eq!(c.request(&get("/status")).status, 403);
    // HTTP/2 with prior knowledge after the header (curl's
    // --haproxy-protocol sends v1 with its own address): the preface after
    // the header is untouched.
    let o = curl(&[
        "--haproxy-protocol",
        "--http2-prior-knowledge",
        "-w",
        "%{http_version}",
        &format!("http://{}/cgi-bin/addr", s.addr),
    ]);
    let out = stdout(&o);
    assert!(out.starts_with("127.0.0.1 ") && out.ends_with('2'), "{out}");
    // No header at all: closed unanswered.
    let mut c = s.connect();
    c.send(&get("/a.txt"));
    let (_, bytes) = c
        .wait_closed(Duration::from_secs(3))
        .expect("the connection must be closed");
    assert!(bytes.is_empty(), "{:?}", String::from_utf8_lossy(&bytes));
    let log = wait_file(&d.join("access.log"), |t| {
        t.lines()
            .any(|l| l.starts_with("203.0.113.9 ") && l.contains("/status"))
    });
    assert!(
        log.lines()
            .any(|l| l.starts_with("203.0.113.9 ") && l.contains("/status")),
        "{log}"
    );
}

/// A Unix-socket listener (nginx `listen unix:PATH`) serves HTTP/1.1 and
/// h2c to curl `--unix-socket`; the file has the configured mode, a stale
/// socket left by an earlier run is replaced, and the file is gone once
/// the server has stopped.
#[test]
fn a_unix_socket_listener_serves_curl_with_its_mode_and_is_removed_at_stop() {
    let d0 = TempDir::new("wire-unix-dir");
    let sock = d0.join("http.sock");
    // A stale socket: bound, then its listener gone.
    drop(std::os::unix::net::UnixListener::bind(&sock).expect("stale socket"));
    assert!(sock.exists());
    let (_d, mut s) = site(
        "wire-unix",
        &format!("listen = [\"127.0.0.1:0\", \"unix:{}\"]", sock.display()),
        "[unix_socket]\nmode = \"0660\"\n",
    );
    let meta = std::fs::symlink_metadata(&sock).expect("socket file");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    let path = sock.to_str().expect("utf-8");
    let o = curl(&["--unix-socket", path, "http://t/a.txt"]);
    assert_eq!(
        stdout(&o),
        "alpha\n",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = curl(&[
        "--http2-prior-knowledge",
        "--unix-socket",
        path,
        "-w",
        "%{http_version}",
        "http://t/a.txt",
    ]);
    assert_eq!(
        stdout(&o),
        "alpha\n2",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // No client address over a Unix socket without a PROXY header.
    let o = curl(&["--unix-socket", path, "http://t/cgi-bin/addr"]);
    assert_eq!(stdout(&o), "0.0.0.0 0\n");
    s.signal(libc::SIGTERM);
    let st = s.wait_exit(Duration::from_secs(5)).expect("exit");
    assert!(st.success(), "{st}");
    assert!(!sock.exists(), "the socket file is left after stop");
}

/// A path that is not a socket is never deleted to make room, and a live
/// socket (another server accepting on it) is never taken over.
#[test]
fn a_unix_listener_path_holding_a_file_or_a_live_socket_fails_start() {
    let d = TempDir::new("wire-unix-busy");
    let file = d.write("not-a-socket", "keep me\n");
    let live = d.join("live.sock");
    let _l = std::os::unix::net::UnixListener::bind(&live).expect("live socket");
    for (path, why) in [(&file, "not a socket"), (&live, "accepting")] {
        let cfg = d.write(
            "stoa.toml",
            format!(
                "listen = [\"127.0.0.1:0\", \"unix:{}\"]\nuser = \"root\"\n[[site]]\nroot = \".\"\n",
                path.display()
            ),
        );
        let e = match Server::try_spawn(["serve", "--config", cfg.to_str().expect("utf-8")]) {
            Ok(_) => panic!("started on {}", path.display()),
            Err(e) => e,
        };
        assert!(e.contains(why), "{e}");
    }
    assert_eq!(std::fs::read_to_string(&file).expect("file"), "keep me\n");
}

/// The header's client is what a proxied application learns too: RFC 7239
/// `Forwarded: for=` and `X-Forwarded-For` name it, not the balancer (as
/// nginx's `$proxy_add_x_forwarded_for` after `real_ip`).
#[test]
fn a_proxied_application_gets_the_header_s_client_in_forwarded_and_x_forwarded_for_rfc7239() {
    require("python3", "python3");
    let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/proxy-peers");
    let mut backend = Command::new("python3")
        .arg(peers.join("backend.py"))
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start backend.py");
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let out = backend.stdout.take().expect("backend stdout");
    let backend = Kill(backend);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).expect("first line");
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("backend.py said {line:?}"))
        .to_owned();
    let d = TempDir::new("wire-pp-forwarded");
    d.mkdir("www");
    let cfg = d.write(
        "stoa.toml",
        format!(
            "listen = [\"127.0.0.1:0\"]\nworkers = 1\nuser = \"root\"\n\n[log]\naccess = \"off\"\n\n\
             [proxy_protocol]\nlisten = [\"127.0.0.1:0\"]\ntrusted_proxies = [\"127.0.0.1\"]\n\n\
             [[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"{addr}\"]\n\n\
             [[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/app/\"\nproxy = {{ pool = \"app\" }}\n"
        ),
    );
    let s = Server::with_config(&cfg);
    let mut c = s.connect();
    c.send(b"PROXY TCP4 203.0.113.9 127.0.0.1 5555 80\r\n");
    let r = c.request(&get("/app/x"));
    assert_eq!(r.status, 200, "{r:?}");
    let t = r.text();
    assert!(t.contains("for=203.0.113.9"), "{t}");
    assert!(t.contains("[\"X-Forwarded-For\", \"203.0.113.9\"]"), "{t}");
    assert!(!t.contains("for=127.0.0.1"), "{t}");
    drop(backend);
}

/// The server process of a root parent: its only child that runs Stoa.
fn server_process(parent: i32) -> i32 {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let children = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
            .unwrap_or_default();
        let found = children
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
            .find(|p| {
                std::fs::read_link(format!("/proc/{p}/exe"))
                    .is_ok_and(|e| e.to_string_lossy().contains("stoa"))
            });
        if let Some(c) = found {
            return c;
        }
        assert!(Instant::now() < until, "no server process under {parent}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` holds a descriptor of a Unix socket bound to
/// `path` (/proc/net/unix lists each socket's inode with its path).
fn holds_unix_socket(pid: i32, path: &Path) -> bool {
    let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let want = path.to_string_lossy();
    let inodes: Vec<String> = table
        .lines()
        .filter(|l| l.split_whitespace().nth(7) == Some(&want))
        .filter_map(|l| l.split_whitespace().nth(6).map(str::to_owned))
        .collect();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|l| {
            let l = l.to_string_lossy().into_owned();
            inodes.iter().any(|i| l == format!("socket:[{i}]"))
        })
    })
}

/// nginx's master binds `listen unix:PATH` as root and its workers accept
/// on it. Started as root with `user = "www-data"`: the root parent makes
/// the socket file with the configured mode and owner in a directory only
/// root may write, hands the socket to the www-data server process (which
/// serves it: its CGI script runs as www-data), and removes the file once
/// the server process has exited, as the process that may.
#[test]
fn under_a_root_parent_the_unix_socket_is_made_as_root_served_by_the_www_data_process_and_removed_at_stop(
) {
    require_root();
    let www = account_uid(TWO_PROCESSES);
    let d0 = TempDir::new("wire-unix-2p-dir");
    std::fs::set_permissions(d0.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let sock = d0.join("http.sock");
    let (_d, mut s) = site_as(
        "wire-unix-2p",
        TWO_PROCESSES,
        &format!("listen = [\"127.0.0.1:0\", \"unix:{}\"]", sock.display()),
        &format!("[unix_socket]\nmode = \"0660\"\nowner = \"{TWO_PROCESSES}\"\n"),
    );
    let meta = std::fs::symlink_metadata(&sock).expect("socket file");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.uid(), www, "owner");
    let path = sock.to_str().expect("utf-8");
    let o = curl(&["--unix-socket", path, "http://t/cgi-bin/uid"]);
    assert_eq!(
        stdout(&o),
        format!("{www}\n"),
        "{}\n{}",
        String::from_utf8_lossy(&o.stderr),
        s.stderr()
    );
    let o = curl(&[
        "--http2-prior-knowledge",
        "--unix-socket",
        path,
        "http://t/a.txt",
    ]);
    assert_eq!(stdout(&o), "alpha\n");
    // The very socket the parent made is the one the server process holds.
    let child = server_process(s.pid());
    assert!(
        holds_unix_socket(child, &sock),
        "the server process has no descriptor of it"
    );
    s.signal(libc::SIGTERM);
    let st = s.wait_exit(Duration::from_secs(10)).expect("exit");
    assert!(st.success(), "{st}\n{}", s.stderr());
    assert!(
        !sock.exists(),
        "the socket file is left after stop:\n{}",
        s.stderr()
    );
}

/// HAProxy's `send-proxy-v2` (proxy-protocol.txt §2.2) in front of a TCP
/// and a Unix-socket listener of a root parent serving as www-data: the
/// flag travels with each socket from the parent to the server process, so
/// CGI and the access log see the address HAProxy took the connection from
/// (127.0.0.2), as nginx's `set_real_ip_from` gives `$remote_addr`.
#[test]
fn under_a_root_parent_behind_haproxy_send_proxy_v2_cgi_sees_the_real_client_address_proxy_protocol_2_2(
) {
    require_root();
    let d0 = TempDir::new("wire-pp-2p-dir");
    let sock = d0.join("pp.sock");
    let (d, s) = site_as(
        "wire-pp-2p",
        TWO_PROCESSES,
        &format!("listen = [\"127.0.0.1:0\", \"unix:{}\"]", sock.display()),
        &format!(
            "[proxy_protocol]\nlisten = [\"127.0.0.1:0\", \"unix:{}\"]\n\
             trusted_proxies = [\"127.0.0.1\"]\n",
            sock.display()
        ),
    );
    let plain = printed_addr(&s, "http");
    let ha_plain = Haproxy::start(&d, "plain", &plain.to_string());
    let ha_unix = Haproxy::start(&d, "unix", &sock.display().to_string());
    for (what, port) in [("plain", ha_plain.port), ("unix", ha_unix.port)] {
        let url = format!("http://127.0.0.1:{port}/cgi-bin/addr");
        let o = curl(&["--interface", "127.0.0.2", &url]);
        let out = stdout(&o);
        assert!(
            o.status.success(),
            "{what}: {out} {}\n{}",
            String::from_utf8_lossy(&o.stderr),
            s.stderr()
        );
        let mut f = out.split_whitespace();
        assert_eq!(f.next(), Some("127.0.0.2"), "{what}: {out}");
        let port: u16 = f.next().and_then(|p| p.parse().ok()).expect("REMOTE_PORT");
        assert_ne!(port, 0, "{what}");
    }
    // A connection without the header on either listener is closed
    // unanswered: the flag is on in the server process.
    let mut c = s.connect();
    c.send(&get("/a.txt"));
    let (_, bytes) = c
        .wait_closed(Duration::from_secs(3))
        .expect("the connection must be closed");
    assert!(bytes.is_empty(), "{:?}", String::from_utf8_lossy(&bytes));
    let o = curl(&[
        "--unix-socket",
        sock.to_str().expect("utf-8"),
        "http://t/a.txt",
    ]);
    assert!(!stdout(&o).contains("alpha"), "served without a header");
    let log = wait_file(&d.join("access.log"), |t| {
        t.lines().filter(|l| l.starts_with("127.0.0.2 ")).count() >= 2
    });
    assert_eq!(
        log.lines().filter(|l| l.starts_with("127.0.0.2 ")).count(),
        2,
        "{log}"
    );
}
