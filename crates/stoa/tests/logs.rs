//! The logs an operator reads: an access-log line for every request, cut
//! ones included (nginx logs every request, with `$request_completion`
//! empty when the response was not sent whole); the `json` and template
//! formats; a route's own `access_log`; rotation by logrotate with
//! `postrotate kill -USR1` (nginx's `reopen`) under load; error lines
//! that say who, what and where; a CGI script's stderr flood counted; a
//! CGI head over the limit answered 502 at once; an unreadable file's 403
//! logged.

mod common;
mod real_apps;

use common::*;
use real_apps::{FpmOptions, PhpFpm};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The access log's JSON lines (written once a second by each worker).
fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Waits until some JSON line of `path` satisfies `pred`.
fn wait_line(
    path: &Path,
    within: Duration,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let until = Instant::now() + within;
    loop {
        if let Some(l) = json_lines(path).into_iter().find(&pred) {
            return l;
        }
        assert!(
            Instant::now() < until,
            "no such line in {}:\n{}",
            path.display(),
            std::fs::read_to_string(path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `path`'s text satisfies `pred`.
fn wait_text(path: &Path, within: Duration, pred: impl Fn(&str) -> bool) -> String {
    let until = Instant::now() + within;
    loop {
        let t = std::fs::read_to_string(path).unwrap_or_default();
        if pred(&t) {
            return t;
        }
        assert!(Instant::now() < until, "{}:\n{t}", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn executable(dir: &TempDir, rel: &str, body: &str) {
    let p = dir.write(rel, body);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Sends a GET, reads until `marker` is in what came back, and closes:
/// a client that leaves in the middle of a response.
fn get_then_leave(server: &Server, path: &str, marker: &[u8]) {
    let mut s = TcpStream::connect(server.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(&get(path)).expect("send");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !contains(&got, marker) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => panic!("response ended before {marker:?}: {got:?}"),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    drop(s);
}

fn config(dir: &TempDir, body: &str) -> Server {
    config_workers(dir, 1, body)
}

fn config_workers(dir: &TempDir, workers: usize, body: &str) -> Server {
    let cfg = dir.write(
        "stoa.toml",
        format!("listen = [\"127.0.0.1:0\"]\nworkers = {workers}\nuser = \"root\"\n\n{body}"),
    );
    Server::with_config(&cfg)
}

/// nginx logs a request whose client closed the connection mid-response
/// (`$request_completion` empty, the bytes actually sent): Stoa writes
/// its line when the exchange ends without `finish`, marked
/// `"complete": false`, with the status the head had.
#[test]
fn a_client_that_aborts_a_cgi_response_leaves_a_line_marked_cut() {
    let dir = TempDir::new("logs-cgi-abort");
    dir.mkdir("www");
    executable(
        &dir,
        "cgi-bin/slow.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\necho first\n\
         i=0; while [ $i -lt 100 ]; do sleep 0.1; echo more $i; i=$((i+1)); done\n",
    );
    let server = config(
        &dir,
        "[log]\naccess = \"access.log\"\nformat = \"json\"\n\n[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = { dir = \"cgi-bin\", timeout = \"20s\" }\n",
    );
    get_then_leave(&server, "/cgi-bin/slow.cgi", b"first");
    let l = wait_line(&dir.join("access.log"), Duration::from_secs(10), |l| {
        l["uri"] == "/cgi-bin/slow.cgi"
    });
    assert_eq!(l["complete"], false, "{l}");
    assert_eq!(l["status"], 200, "{l}");
    assert!(l["body_bytes_sent"].as_u64().is_some_and(|n| n >= 6), "{l}");
    assert!(
        l["upstream_addr"]
            .as_str()
            .is_some_and(|a| a.ends_with("slow.cgi")),
        "{l}"
    );
}

/// A FastCGI application of the test's own on a TCP socket: answers
/// FCGI_GET_VALUES with nothing, and each request (after its empty
/// STDIN) with a head and `hello`; then, by `mode`, `cut`: a STDOUT
/// record that promises 1000 bytes and brings 10 before the connection
/// closes; `hold`: nothing more until Stoa closes the connection.
fn raw_fastcgi_app(mode: &'static str) -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let t = std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        let _ = s.set_read_timeout(Some(Duration::from_secs(15)));
        let mut id = [0u8; 2];
        loop {
            let mut h = [0u8; 8];
            if s.read_exact(&mut h).is_err() {
                return;
            }
            let len = usize::from(u16::from_be_bytes([h[4], h[5]])) + usize::from(h[6]);
            let mut body = vec![0u8; len];
            if s.read_exact(&mut body).is_err() {
                return;
            }
            match h[1] {
                // FCGI_GET_VALUES: an empty FCGI_GET_VALUES_RESULT.
                9 => {
                    let _ = s.write_all(&[1, 10, 0, 0, 0, 0, 0, 0]);
                }
                1 => id = [h[2], h[3]],
                // The empty FCGI_STDIN: the request is complete.
                5 if h[4] == 0 && h[5] == 0 => break,
                _ => {}
            }
        }
        let out = b"Status: 200 OK\r\nContent-Type: text/plain\r\n\r\nhello\n";
        let mut rec = vec![1, 6, id[0], id[1], 0, out.len() as u8, 0, 0];
        rec.extend_from_slice(out);
        let _ = s.write_all(&rec);
        if mode == "cut" {
            // 1000 bytes promised, 10 sent, then the connection closes.
            let _ = s.write_all(&[1, 6, id[0], id[1], 0x03, 0xe8, 0, 0]);
            let _ = s.write_all(b"0123456789");
            return;
        }
        // Hold until Stoa lets go of the request.
        let mut b = [0u8; 64];
        while matches!(s.read(&mut b), Ok(n) if n > 0) {}
    });
    (addr, t)
}

fn fastcgi_site(dir: &TempDir, app: std::net::SocketAddr) -> Server {
    dir.mkdir("www");
    config(
        dir,
        &format!(
            "[log]\naccess = \"access.log\"\nformat = \"json\"\n\n\
             [[pool]]\nname = \"raw\"\naddress = [\"{app}\"]\ntimeout = \"20s\"\n\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/app/\"\nfastcgi = {{ pool = \"raw\" }}\n"
        ),
    )
}

/// A client that leaves a FastCGI response that is still coming: the
/// request is aborted upstream (FCGI_ABORT_REQUEST or the connection
/// closed) and still has its line, marked cut, naming the application.
#[test]
fn a_client_that_aborts_a_fastcgi_response_leaves_a_line_marked_cut() {
    let dir = TempDir::new("logs-fcgi-abort");
    let (app, t) = raw_fastcgi_app("hold");
    let server = fastcgi_site(&dir, app);
    get_then_leave(&server, "/app/x", b"hello");
    let l = wait_line(&dir.join("access.log"), Duration::from_secs(10), |l| {
        l["uri"] == "/app/x"
    });
    assert_eq!(l["complete"], false, "{l}");
    assert_eq!(l["status"], 200, "{l}");
    assert_eq!(l["upstream_addr"], app.to_string(), "{l}");
    drop(server);
    let _ = t.join();
}

/// An application that closes its connection in the middle of a record:
/// the client sees the truncation (no last chunk), the access log has the
/// line marked cut, and the error line names the pool, the client, the
/// request and the application's address (nginx: "upstream prematurely
/// closed connection ..., client: ..., request: ..., upstream: ...").
#[test]
fn a_fastcgi_app_closing_mid_record_leaves_a_cut_line_and_an_error_naming_who() {
    let dir = TempDir::new("logs-fcgi-cut");
    let (app, t) = raw_fastcgi_app("cut");
    let server = fastcgi_site(&dir, app);
    let mut c = server.connect();
    c.send(&get("/app/cut"));
    let _ = c.wait_closed(Duration::from_secs(10));
    let l = wait_line(&dir.join("access.log"), Duration::from_secs(10), |l| {
        l["uri"] == "/app/cut"
    });
    assert_eq!(l["complete"], false, "{l}");
    assert_eq!(l["status"], 200, "{l}");
    let until = Instant::now() + Duration::from_secs(5);
    let line = loop {
        let e = server.stderr();
        if let Some(l) = e
            .lines()
            .find(|l| l.contains("fastcgi pool raw") && l.contains("client: "))
        {
            break l.to_owned();
        }
        assert!(Instant::now() < until, "no error line with context:\n{e}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        line.contains("request: \"GET /app/cut HTTP/1.1\""),
        "{line}"
    );
    assert!(line.contains(&format!("upstream: \"{app}\"")), "{line}");
    let _ = t.join();
}

/// A php-fpm worker killed (SIGKILL) in the middle of its response: the
/// response is cut, and its line is in the access log (under a php-fpm
/// reload, 1 of 1,500 requests used to leave none).
#[test]
fn a_php_fpm_worker_killed_mid_response_leaves_a_line() {
    let dir = TempDir::new("logs-fpm-kill");
    let fpm = PhpFpm::start(&dir, FpmOptions::default());
    dir.write(
        "www/k.php",
        "<?php while (ob_get_level()) ob_end_flush();\n\
         echo 'pid=', getmypid(), \"\\n\", str_repeat('x', 9000), \"\\n\"; flush();\n\
         sleep(10); echo \"never\\n\";\n",
    );
    let server = config(
        &dir,
        &format!(
            "[log]\naccess = \"access.log\"\nformat = \"json\"\n\n{}\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nsuffix = \".php\"\nfastcgi = {{ pool = \"php\" }}\n",
            fpm.pool("php", 4, "")
        ),
    );
    let mut s = TcpStream::connect(server.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    s.write_all(&get("/k.php")).expect("send");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let pid: i32 = loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => panic!("response ended early: {got:?}"),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&got);
        if let Some(p) = text.split("pid=").nth(1).and_then(|r| r.split('\n').next()) {
            if text.split("pid=").nth(1).is_some_and(|r| r.contains('\n')) {
                break p.trim().parse().expect("pid");
            }
        }
    };
    // SAFETY: kill(2) on the php-fpm worker this test's request runs on.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    // The client sees the end (a chunked body without its last chunk).
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    let l = wait_line(&dir.join("access.log"), Duration::from_secs(10), |l| {
        l["uri"] == "/k.php"
    });
    assert_eq!(l["complete"], false, "{l}");
    assert!(
        l["upstream_addr"]
            .as_str()
            .is_some_and(|a| a.starts_with("unix:")),
        "{l}"
    );
}

/// Requests `stoa bench` sends in the logrotate tests.
const ROTATE_N: u64 = 20_000;

/// Runs `logrotate -f CONF` once `log` has lines, while `stoa bench`
/// sends [`ROTATE_N`] kept-alive requests to `addr`; checks they all
/// completed and waits for the lines to be flushed. The lines in `log`
/// (the new file) and in `rotated`.
fn rotate_under_load(
    dir: &TempDir,
    addr: std::net::SocketAddr,
    conf: &Path,
    log: &Path,
    rotated: &Path,
) -> (u64, u64) {
    let url = format!("http://{addr}/index.html");
    let bench = std::thread::spawn(move || {
        Command::new(stoa_bin())
            .args(["bench", "-n", &ROTATE_N.to_string(), "-c", "4", "-k", &url])
            .output()
            .expect("run stoa bench")
    });
    // Rotate once the log has lines, while the load goes on.
    wait_text(log, Duration::from_secs(20), |t| t.lines().count() > 100);
    let out = Command::new("/usr/sbin/logrotate")
        .arg("-f")
        .arg("-s")
        .arg(dir.join("logrotate.state"))
        .arg(conf)
        .output()
        .expect("run logrotate");
    assert!(out.status.success(), "logrotate: {out:?}");
    let out = bench.join().expect("bench thread");
    let report = String::from_utf8_lossy(&out.stdout);
    let complete = report
        .lines()
        .find_map(|l| l.strip_prefix("Complete requests:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no count in:\n{report}"));
    assert_eq!(complete, ROTATE_N, "{report}");
    let count = |p: &Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .count() as u64
    };
    let until = Instant::now() + Duration::from_secs(10);
    while count(log) + count(rotated) < ROTATE_N && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    // A flush or two more: nothing beyond the requests may come.
    std::thread::sleep(Duration::from_millis(1500));
    (count(log), count(rotated))
}

/// logrotate's `create` + `postrotate kill -USR1` (nginx's reopen) in the
/// middle of `stoa bench` load: every request is in exactly one of the
/// two files (their lines add up to the requests), and both have some.
#[test]
fn logrotate_with_usr1_under_load_keeps_every_request_in_exactly_one_file() {
    require("/usr/sbin/logrotate", "logrotate");
    let dir = TempDir::new("logs-rotate");
    dir.write("www/index.html", "hello\n");
    let server = config_workers(
        &dir,
        2,
        "[log]\naccess = \"access.log\"\n\n[[site]]\nroot = \"www\"\n",
    );
    let log = dir.join("access.log");
    let conf = dir.write(
        "logrotate.conf",
        format!(
            "{} {{\n  rotate 1\n  create\n  postrotate\n    kill -USR1 {}\n  endscript\n}}\n",
            log.display(),
            server.pid()
        ),
    );
    let (new, old) = rotate_under_load(&dir, server.addr, &conf, &log, &dir.join("access.log.1"));
    assert_eq!(
        new + old,
        ROTATE_N,
        "{old} lines in the rotated file, {new} in the new one"
    );
    assert!(old > 0 && new > 0, "{old} rotated, {new} new");
    assert!(
        server.wait_stderr(0, "log files reopened", Duration::from_secs(10)),
        "{}",
        server.stderr()
    );
}

/// The `json` format: one valid object per line with the documented
/// fields; a template: nginx `log_format` variables, `-` for an empty
/// one; a route with `access_log = false` (nginx `access_log off`) writes
/// nothing, one with a file of its own writes there only.
#[test]
fn formats_and_route_logs_write_what_the_docs_say() {
    let dir = TempDir::new("logs-formats");
    dir.write("www/a.txt", "aaaa\n");
    dir.write("www/quiet/q.txt", "q\n");
    dir.write("www/other/o.txt", "o\n");
    let server = config(
        &dir,
        "[log]\naccess = \"access.log\"\n\
         format = '$remote_addr \"$request\" $status $body_bytes_sent $server_protocol $scheme c=$request_completion ua=$http_user_agent x=$http_x_trace t=$request_time'\n\n\
         [[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/quiet/\"\nstatic = {}\naccess_log = false\n\n\
         [[site.route]]\nprefix = \"/other/\"\nstatic = {}\naccess_log = \"other.log\"\n",
    );
    let r = server
        .request(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Trace: t1\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(server.get("/quiet/q.txt").status, 200);
    assert_eq!(server.get("/other/o.txt").status, 200);
    let text = wait_text(&dir.join("access.log"), Duration::from_secs(5), |t| {
        t.contains("/a.txt")
    });
    let line = text.lines().find(|l| l.contains("/a.txt")).expect("line");
    let (head, t) = line.split_once(" t=").expect("request time");
    assert_eq!(
        head,
        "127.0.0.1 \"GET /a.txt HTTP/1.1\" 200 5 HTTP/1.1 http c=OK ua=- x=t1"
    );
    assert!(t.parse::<f64>().is_ok_and(|s| s < 5.0), "{t}");
    let other = wait_text(&dir.join("other.log"), Duration::from_secs(5), |t| {
        t.contains("/other/o.txt")
    });
    assert_eq!(other.lines().count(), 1, "{other}");
    // A later request, flushed after the others: the quiet route's never
    // came.
    let _ = server.get("/a.txt?again");
    let text = wait_text(&dir.join("access.log"), Duration::from_secs(5), |t| {
        t.contains("again")
    });
    assert!(
        !text.contains("/quiet/") && !text.contains("/other/"),
        "{text}"
    );
}

/// JSON lines: every field documented, proper escaping of a request that
/// tries to forge a line or break the JSON.
#[test]
fn json_lines_escape_what_the_client_sent() {
    let dir = TempDir::new("logs-json");
    dir.write("www/a.txt", "aaaa\n");
    let server = config(
        &dir,
        "[log]\naccess = \"access.log\"\nformat = \"json\"\n\n[[site]]\nroot = \"www\"\n",
    );
    let r = server.request(
        b"GET /a.txt?q=%22 HTTP/1.1\r\nHost: x\r\nUser-Agent: evil\" \\ \xff\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    let l = wait_line(&dir.join("access.log"), Duration::from_secs(5), |l| {
        l["uri"] == "/a.txt?q=%22"
    });
    for k in [
        "time",
        "remote_addr",
        "remote_port",
        "request",
        "method",
        "protocol",
        "tls",
        "status",
        "body_bytes_sent",
        "bytes_sent",
        "request_length",
        "request_time",
        "upstream_addr",
        "upstream_response_time",
        "complete",
        "host",
        "referer",
        "user_agent",
    ] {
        assert!(l.get(k).is_some(), "no {k} in {l}");
    }
    assert_eq!(l["user_agent"], "evil\" \\ \u{ff}");
    assert_eq!(l["complete"], true);
    assert_eq!(l["body_bytes_sent"], 5);
    assert!(l["bytes_sent"].as_u64().is_some_and(|n| n > 5), "{l}");
    assert!(l["request_length"].as_u64().is_some_and(|n| n > 40), "{l}");
    assert!(l["upstream_addr"].is_null());
}

/// 200,000 stderr lines from one CGI request: the first MiB is logged
/// line by line, and the rest is counted in one line: logged + counted =
/// 200,000 (45,590 were logged and the rest dropped without a word). The
/// error log goes to `[log] error`.
#[test]
fn a_cgi_stderr_flood_is_logged_up_to_a_bound_and_the_rest_counted() {
    let dir = TempDir::new("logs-stderr");
    dir.mkdir("www");
    executable(
        &dir,
        "cgi-bin/flood.cgi",
        "#!/bin/sh\nseq 1 200000 | sed 's/^/flood line /' >&2\n\
         printf 'Content-Type: text/plain\\r\\n\\r\\nok\\n'\n",
    );
    let server = config(
        &dir,
        "[log]\naccess = \"off\"\nerror = \"error.log\"\n\n[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = { dir = \"cgi-bin\", timeout = \"30s\" }\n",
    );
    assert_eq!(server.get("/cgi-bin/flood.cgi").status, 200);
    let text = wait_text(&dir.join("error.log"), Duration::from_secs(30), |t| {
        t.contains("not logged")
    });
    let logged = text.lines().filter(|l| l.contains(": flood line ")).count() as u64;
    let counted: u64 = text
        .lines()
        .find(|l| l.contains("not logged"))
        .and_then(|l| l.split("cgi /cgi-bin/flood.cgi: ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in:\n{}", &text[text.len().saturating_sub(2000)..]));
    assert_eq!(
        logged + counted,
        200_000,
        "{logged} logged, {counted} counted"
    );
    assert!(logged > 10_000, "{logged}");
    assert!(
        text.contains("client: 127.0.0.1"),
        "stderr lines name the client"
    );
}

/// A CGI head that passes the 64 KiB head limit without ending (1 MB and
/// no newline) is refused at once with 502, not left to the route's
/// timeout (504), as nginx's `proxy_buffer_size` overflow answers 502.
#[test]
fn a_cgi_head_past_the_limit_is_a_502_at_once() {
    let dir = TempDir::new("logs-cgi-head");
    dir.mkdir("www");
    executable(
        &dir,
        "cgi-bin/head.cgi",
        "#!/bin/sh\nhead -c 1048576 /dev/zero | tr '\\0' a\nsleep 30\n",
    );
    let server = config(
        &dir,
        "[log]\naccess = \"off\"\n\n[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = { dir = \"cgi-bin\", timeout = \"20s\" }\n",
    );
    let t = Instant::now();
    let r = server.get("/cgi-bin/head.cgi");
    assert_eq!(r.status, 502, "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(
        server.wait_stderr(0, "head too large", Duration::from_secs(10)),
        "{}",
        server.stderr()
    );
}

/// A file the server may not read gets 403 and an error line naming it
/// and the client (nginx: `open() "..." failed (13: Permission denied)`),
/// as symlinks refused are. As root the server runs as `nobody`.
#[test]
fn an_unreadable_file_gets_403_and_an_error_line() {
    let dir = TempDir::new("logs-unreadable");
    let secret = dir.write("www/secret.txt", "no\n");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    for d in [dir.path().to_path_buf(), dir.join("www")] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let cfg = dir.write(
        "stoa.toml",
        "listen = [\"127.0.0.1:0\"]\nworkers = 1\nuser = \"nobody\"\n\n[log]\naccess = \"off\"\n\n\
         [[site]]\nroot = \"www\"\n",
    );
    let server = Server::with_config(&cfg);
    let r = server.get("/secret.txt");
    assert_eq!(r.status, 403);
    assert!(
        server.wait_stderr(0, "secret.txt: Permission denied", Duration::from_secs(5)),
        "{}",
        server.stderr()
    );
    assert!(
        server.wait_stderr(0, "client: 127.0.0.1", Duration::from_secs(10)),
        "{}",
        server.stderr()
    );
}

/// HTTP/2 alike: a client that resets its stream (RST_STREAM CANCEL) in
/// the middle of a CGI response leaves a line marked cut, with the
/// protocol `HTTP/2.0` (h2c with prior knowledge, RFC 9113 §3.3).
#[test]
fn an_http2_stream_reset_mid_cgi_response_leaves_a_line_marked_cut() {
    let dir = TempDir::new("logs-h2-reset");
    dir.mkdir("www");
    executable(
        &dir,
        "cgi-bin/slow.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\necho first\n\
         i=0; while [ $i -lt 100 ]; do sleep 0.1; echo more $i; i=$((i+1)); done\n",
    );
    let server = config(
        &dir,
        "[log]\naccess = \"access.log\"\nformat = \"json\"\n\n[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = { dir = \"cgi-bin\", timeout = \"20s\" }\n",
    );
    let addr = server.addr;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (client, conn) = h2::client::handshake(tcp).await.expect("handshake");
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut client = client.ready().await.expect("ready");
        let req = http::Request::get(format!("http://{addr}/cgi-bin/slow.cgi"))
            .body(())
            .expect("request");
        let (resp, _) = client.send_request(req, true).expect("send");
        let resp = tokio::time::timeout(Duration::from_secs(10), resp)
            .await
            .expect("head in time")
            .expect("head");
        assert_eq!(resp.status(), 200);
        let mut body = resp.into_body();
        let first = tokio::time::timeout(Duration::from_secs(10), body.data())
            .await
            .expect("data in time");
        assert!(first.is_some_and(|d| d.is_ok()));
        // Dropping the body and the client resets the stream; the
        // connection then ends (no handle left), its frames sent.
        drop(body);
        drop(client);
        let _ = tokio::time::timeout(Duration::from_secs(5), driver).await;
    });
    let l = wait_line(&dir.join("access.log"), Duration::from_secs(10), |l| {
        l["uri"] == "/cgi-bin/slow.cgi"
    });
    assert_eq!(l["complete"], false, "{l}");
    assert_eq!(l["protocol"], "HTTP/2.0", "{l}");
    assert_eq!(l["status"], 200, "{l}");
    // The head counts in bytes_sent, as in nginx's `$bytes_sent`.
    let (body, all) = (l["body_bytes_sent"].as_u64(), l["bytes_sent"].as_u64());
    assert!(matches!((body, all), (Some(b), Some(a)) if a > b), "{l}");
}

/// `mv` then SIGUSR1 (nginx's reopen, by hand): the error log and a
/// route's own access log are opened again by name; what came before
/// stays in the moved files, what comes after is in the new ones.
#[test]
fn usr1_reopens_the_error_log_and_routes_access_logs_by_name() {
    let dir = TempDir::new("logs-usr1");
    dir.write("www/api/x.txt", "x\n");
    let server = config(
        &dir,
        "[log]\naccess = \"off\"\nerror = \"error.log\"\n\n[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/api/\"\nstatic = {}\naccess_log = \"api.log\"\n",
    );
    assert_eq!(server.get("/api/x.txt?before").status, 200);
    wait_text(&dir.join("api.log"), Duration::from_secs(5), |t| {
        t.contains("before")
    });
    std::fs::rename(dir.join("api.log"), dir.join("api.log.1")).expect("mv");
    std::fs::rename(dir.join("error.log"), dir.join("error.log.1")).expect("mv");
    server.signal(libc::SIGUSR1);
    let err = wait_text(&dir.join("error.log"), Duration::from_secs(5), |t| {
        t.contains("log files reopened")
    });
    assert!(!err.contains("serving on"), "{err}");
    assert!(
        std::fs::read_to_string(dir.join("error.log.1"))
            .unwrap_or_default()
            .contains("serving on"),
        "the start-up lines stay in the moved file"
    );
    assert_eq!(server.get("/api/x.txt?after").status, 200);
    let api = wait_text(&dir.join("api.log"), Duration::from_secs(5), |t| {
        t.contains("after")
    });
    assert!(!api.contains("before"), "{api}");
    let old = std::fs::read_to_string(dir.join("api.log.1")).unwrap_or_default();
    assert!(old.contains("before") && !old.contains("after"), "{old}");
}

/// A client that stops reading a large CGI response: `send_timeout`
/// passes, the response is cut (nginx: "client timed out", its line with
/// `$request_completion` empty), and the line is there, marked cut, with
/// fewer body bytes than the script wrote.
#[test]
fn a_cgi_response_cut_by_send_timeout_leaves_a_line_marked_cut() {
    let dir = TempDir::new("logs-send-timeout");
    dir.mkdir("www");
    executable(
        &dir,
        "cgi-bin/big.cgi",
        "#!/bin/sh\nprintf 'Content-Type: application/octet-stream\\r\\n\\r\\n'\n\
         head -c 67108864 /dev/zero\n",
    );
    let server = config(
        &dir,
        "[limits]\nsend_timeout = \"1s\"\n\n\
         [log]\naccess = \"access.log\"\nformat = \"json\"\n\n[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = { dir = \"cgi-bin\", timeout = \"30s\" }\n",
    );
    let mut c = server.connect();
    c.set_recv_buffer(4096);
    c.send(&get("/cgi-bin/big.cgi"));
    // Never read: the server's writes stall, and after send_timeout it
    // gives up on this client.
    let l = wait_line(&dir.join("access.log"), Duration::from_secs(20), |l| {
        l["uri"] == "/cgi-bin/big.cgi"
    });
    assert_eq!(l["complete"], false, "{l}");
    assert_eq!(l["status"], 200, "{l}");
    assert!(
        l["body_bytes_sent"]
            .as_u64()
            .is_some_and(|n| n < 67_108_864),
        "{l}"
    );
    drop(c);
}

/// A config for a root parent and its server process as `www-data`
/// (nginx's master and workers), the logs in `logs/`: a directory root
/// owns, mode 0755, where the server's user may create nothing (Debian's
/// `/var/log/nginx` and the package's `/var/log/stoa` are such).
fn two_processes(dir: &TempDir, workers: usize, body: &str) -> Server {
    require_root();
    let logs = dir.mkdir("logs");
    std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "listen = [\"127.0.0.1:0\"]\nworkers = {workers}\nuser = \"{TWO_PROCESSES}\"\n\n{body}"
        ),
    );
    Server::with_config(&cfg)
}

/// The owner and group of a file.
fn owner(p: &Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (m.uid(), m.gid())
}

/// The same rotation under a privileged parent, as the package ships it
/// (packaging/stoa.logrotate: `create 0640 root adm`, `postrotate` sends
/// USR1 to the main pid, the root parent): the new files are root's, in
/// a directory the server's user cannot write, and the parent reopens
/// them for it (nginx's master does the same on `reopen`, making the
/// worker user their owner, the group kept). Every request is in exactly
/// one of the two access logs, and the error log is reopened too.
#[test]
fn logrotate_create_root_adm_under_a_privileged_parent_keeps_every_request_in_one_file() {
    require("/usr/sbin/logrotate", "logrotate");
    let dir = TempDir::new("logs-rotate-parent");
    dir.write("www/index.html", "hello\n");
    let server = two_processes(
        &dir,
        2,
        "[log]\naccess = \"logs/access.log\"\nerror = \"logs/error.log\"\n\n[[site]]\nroot = \"www\"\n",
    );
    let log = dir.join("logs/access.log");
    let err = dir.join("logs/error.log");
    let conf = dir.write(
        "logrotate.conf",
        format!(
            "{}/*.log {{\n  rotate 1\n  create 0640 root adm\n  sharedscripts\n  postrotate\n    kill -USR1 {}\n  endscript\n}}\n",
            dir.join("logs").display(),
            server.pid()
        ),
    );
    let (new, old) = rotate_under_load(
        &dir,
        server.addr,
        &conf,
        &log,
        &dir.join("logs/access.log.1"),
    );
    assert_eq!(
        new + old,
        ROTATE_N,
        "{old} lines in the rotated file, {new} in the new one\nerror log:\n{}",
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    assert!(old > 0 && new > 0, "{old} rotated, {new} new");
    // The server process reopened the new error log (through the parent)
    // and said so there; the start-up lines stay in the rotated one.
    let text = wait_text(&err, Duration::from_secs(5), |t| {
        t.contains("log files reopened")
    });
    assert!(!text.contains("serving on"), "{text}");
    assert!(
        std::fs::read_to_string(dir.join("logs/error.log.1"))
            .unwrap_or_default()
            .contains("started the server process"),
        "the parent's lines are in the error log too"
    );
    let adm = 4;
    let www = account_uid(TWO_PROCESSES);
    assert_eq!(owner(&log), (www, adm), "the user owns it, adm reads it");
    assert_eq!(owner(&err), (www, adm));
}

/// A reload that adds a route with its own `access_log` in a directory
/// only root may write: the server process cannot create the file, the
/// privileged parent opens it for it (the reloaded configuration names
/// it), and the route's lines are there.
#[test]
fn a_route_log_added_by_a_reload_in_a_root_only_directory_gets_its_lines() {
    let dir = TempDir::new("logs-reload-parent");
    dir.write("www/api/x.txt", "x\n");
    let server = two_processes(
        &dir,
        1,
        "[log]\naccess = \"off\"\n\n[[site]]\nroot = \"www\"\n",
    );
    assert_eq!(server.get("/api/x.txt?before").status, 200);
    dir.write(
        "stoa.toml",
        format!(
            "listen = [\"{}\"]\nworkers = 1\nuser = \"{TWO_PROCESSES}\"\n\n\
             [log]\naccess = \"off\"\n\n[[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/api/\"\nstatic = {{}}\naccess_log = \"logs/api.log\"\n",
            server.addr
        ),
    );
    let from = server.stderr().len();
    server.signal(libc::SIGHUP);
    assert!(
        server.wait_stderr(from, "reloaded", Duration::from_secs(10)),
        "{}",
        server.stderr()
    );
    assert_eq!(server.get("/api/x.txt?after").status, 200);
    let api = dir.join("logs/api.log");
    let text = wait_text(&api, Duration::from_secs(5), |t| t.contains("after"));
    assert!(!text.contains("before"), "{text}");
    assert_eq!(owner(&api).0, account_uid(TWO_PROCESSES));
    assert!(
        !server.stderr().contains("api.log:"),
        "no error opening it:\n{}",
        server.stderr()
    );
}
