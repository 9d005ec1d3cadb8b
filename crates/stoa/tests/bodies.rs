//! Issue 10, "nothing lost, nobody starved": request bodies are read
//! before an application is taken, slow ones are cut off by a minimum
//! rate, early answers go out at once, and no response is destroyed by a
//! reset at close (lingering close, RFC 9112 §9.6).
//!
//! Needs curl (Debian package curl, installed by test.sh).

mod common;
use common::*;
use std::io::Write;
use std::time::{Duration, Instant};

const HELLO_FCGI: &str = env!("CARGO_BIN_EXE_stoa-hello-fcgi");

/// A site with a CGI directory holding `hello.sh` (answers without reading
/// its input) and `echo-len.sh` (reads its input, says how much), a pool
/// of two `stoa-hello-fcgi` processes at `/app/`, and `top` keys.
fn site(tag: &str, top: &str, route_extra: &str) -> (TempDir, Server) {
    let dir = TempDir::new(tag);
    dir.mkdir("www");
    dir.write("www/index.html", "home\n");
    let hello = dir.write(
        "cgi-bin/hello.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nhello from sh\\n'\n",
    );
    let echo = dir.write(
        "cgi-bin/echo-len.sh",
        "#!/bin/sh\nn=$(wc -c)\nprintf 'Content-Type: text/plain\\r\\n\\r\\nlen=%s\\n' \"$n\"\n",
    );
    for p in [hello, echo] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "{top}\n[cgi]\nmax_processes = 4\nqueue_timeout = \"1s\"\n\n\
             [[pool]]\nname = \"app\"\ncommand = [\"{HELLO_FCGI}\"]\nprocesses = 2\nqueue_timeout = \"1s\"\n\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"cgi-bin\" }}\n{route_extra}\n\n\
             [[site.route]]\nprefix = \"/app/\"\nfastcgi = {{ pool = \"app\" }}\n{route_extra}\n"
        ),
    );
    let server = Server::with_config(&cfg);
    (dir, server)
}

/// Opens `n` connections that send a POST head announcing a large body,
/// and only a few bytes of it.
fn slow_uploads(server: &Server, path: &str, n: usize) -> Vec<Conn> {
    (0..n)
        .map(|_| {
            let mut c = server.connect();
            c.send(
                format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\nslow")
                    .as_bytes(),
            );
            c
        })
        .collect()
}

/// Issue 10 item 1: ten clients uploading slowly to a FastCGI pool of two
/// processes (and to CGI with four slots) hold only their connections: the
/// body is read before a process is taken, as nginx does, so other
/// clients' requests are served meanwhile.
#[test]
fn slow_uploads_take_no_fastcgi_process_or_cgi_slot_from_other_clients() {
    let (_dir, server) = site("bodies-slow", "", "");
    let _fcgi = slow_uploads(&server, "/app/upload", 10);
    let _cgi = slow_uploads(&server, "/cgi-bin/echo-len.sh", 10);
    // Let the uploads reach whatever they would pin.
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    for i in 0..20 {
        let r = server.get(&format!("/app/?i={i}"));
        assert_eq!(r.status, 200, "FastCGI GET {i} while uploads crawl: {r:?}");
        let r = server.get("/cgi-bin/hello.sh");
        assert_eq!(r.status, 200, "CGI GET {i} while uploads crawl: {r:?}");
    }
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "40 requests took {:?} beside 20 slow uploads",
        t0.elapsed()
    );
}

/// Issue 10 item 1 (Apache mod_reqtimeout's MinRate): a body that falls
/// below `body_min_rate` once `body_timeout` has passed is cut off with
/// 408 (RFC 9110 §15.5.9); one that keeps the rate is read to its end.
#[test]
fn a_body_slower_than_body_min_rate_gets_408_and_one_at_the_rate_gets_through() {
    let (_dir, server) = site(
        "bodies-minrate",
        "[limits]\nbody_timeout = \"1s\"\nbody_min_rate = 2000\n",
        "",
    );
    // 5 bytes every 200 ms: 25 B/s, far below 2000 B/s.
    let mut c = server.connect();
    c.send(b"POST /cgi-bin/echo-len.sh HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n");
    let t0 = Instant::now();
    let mut status = 0;
    while t0.elapsed() < Duration::from_secs(4) {
        if c.try_send(b"xxxxx").is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        if let Ok(r) = c.stream.set_nonblocking(true).and_then(|_| {
            let mut b = [0u8; 1];
            c.stream.peek(&mut b)
        }) {
            if r > 0 {
                break;
            }
        }
    }
    c.stream.set_nonblocking(false).expect("blocking again");
    if let Ok(r) = c.try_read_final() {
        status = r.status;
    }
    assert_eq!(status, 408, "a 25 B/s body against a 2000 B/s minimum");
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "cut off after {took:?}, body_timeout is 1 s"
    );

    // 4000 bytes at ~4000 B/s over ~1.5 s (past body_timeout): kept.
    let mut c = server.connect();
    c.send(b"POST /cgi-bin/echo-len.sh HTTP/1.1\r\nHost: t\r\nContent-Length: 6000\r\n\r\n");
    for _ in 0..15 {
        c.send(&[b'y'; 400]);
        std::thread::sleep(Duration::from_millis(100));
    }
    c.send(&[b'y'; 2000]);
    let r = c.read_final();
    assert_eq!((r.status, r.text().trim()), (200, "len=6000"), "{r:?}");
}

/// Issue 10 item 4: an answer that needs no body (404, 405) goes out at
/// once, not when the body has arrived or `body_timeout` passed (nginx
/// does the same); the connection then still reads past the body.
#[test]
fn an_error_to_a_request_whose_body_is_still_coming_is_answered_at_once() {
    let (_dir, server) = site("bodies-early", "[limits]\nbody_timeout = \"30s\"\n", "");
    for path in ["/missing.txt", "/index.html"] {
        let mut c = server.connect();
        c.send(
            format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n0123456789")
                .as_bytes(),
        );
        let t0 = Instant::now();
        let r = c.read_final();
        assert!(matches!(r.status, 404 | 405), "{path}: {r:?}");
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "{path}: answered after {:?}",
            t0.elapsed()
        );
        // The rest of the body, then another request on the same
        // connection.
        c.send(&[b'z'; 990]);
        let r = c.request(&get("/index.html"));
        assert_eq!((r.status, r.text().as_str()), (200, "home\n"));
    }
}

/// Issue 10 item 3 (RFC 9112 §9.6, lingering close): 1,000 uploads of
/// 4 MiB, eight at a time, by curl, to a script that never reads its
/// input, streamed to it (`request_buffering = false`) so Stoa closes with
/// most of the body unread: every one gets its answer (curl exit 0, 200);
/// none is destroyed by a reset.
#[test]
fn a_thousand_4_mib_uploads_to_a_script_that_ignores_them_all_get_their_answer() {
    require("curl", "curl");
    let (dir, server) = site("bodies-linger", "", "request_buffering = false");
    let body = dir.write("4M.bin", vec![b'q'; 4 << 20]);
    let url = format!("http://{}/cgi-bin/hello.sh", server.addr);
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "seq 1000 | xargs -P8 -I{{}} curl -s -o /dev/null --max-time 30 \
             -w '%{{http_code}}/%{{exitcode}}\\n' -H 'Expect:' --data-binary @{} {url}",
            body.display()
        ))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1000, "{text}");
    let bad: Vec<&&str> = lines.iter().filter(|l| **l != "200/0").collect();
    assert!(
        bad.is_empty(),
        "{} of 1000 uploads lost their answer: {:?}",
        bad.len(),
        &bad[..bad.len().min(20)]
    );
    let _ = std::io::stdout().flush();
}

/// Issue 10 item 7 (RFC 3875 §6.3.4: the response ends with the script's
/// output): a script that exits leaving a background process with its
/// stdout open. A response without a length ends once the script has
/// exited and stdout stayed quiet a moment, properly (chunked, with its
/// last chunk), not cut at the CGI timeout; one with a length ends when
/// its bytes are sent.
#[test]
fn a_script_whose_background_child_keeps_stdout_open_still_ends_its_response() {
    let (dir, server) = site("bodies-bg", "", "");
    for (name, head) in [
        ("bg.sh", "Content-Type: text/plain\\r\\n\\r\\n"),
        (
            "bg-len.sh",
            "Content-Type: text/plain\\r\\nContent-Length: 5\\r\\n\\r\\n",
        ),
    ] {
        let p = dir.write(
            &format!("cgi-bin/{name}"),
            format!("#!/bin/sh\nprintf '{head}done\\n'\nsleep 5 &\nexit 0\n"),
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    for path in ["/cgi-bin/bg.sh", "/cgi-bin/bg-len.sh"] {
        let t0 = Instant::now();
        let mut c = server.connect();
        let r = c.request(&get(path));
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "done\n"),
            "{path}: {r:?}"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "{path}: took {:?} (the CGI timeout is 30 s)",
            t0.elapsed()
        );
        // The connection is still good for another request.
        let r = c.request(&get("/index.html"));
        assert_eq!(r.status, 200, "{path}: then {r:?}");
    }
}
