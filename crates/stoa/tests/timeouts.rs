//! Timeouts: slow or silent clients cannot hold a connection forever
//! (slowloris, CVE-2007-6750; RFC 9110 §15.5.9 408), idle persistent
//! connections are closed (RFC 9112 §9.5), and a client that stops reading
//! is dropped.

mod common;
use common::*;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BIG: usize = 12 * 1024 * 1024;

fn site(limits: &str) -> (TempDir, Server) {
    let d = TempDir::new("timeouts");
    d.write("www/a.txt", "alpha\n");
    let cfg = d.config(
        "stoa.toml",
        &format!("[limits]\n{limits}\n[[site]]\nroot = \"www\"\n"),
    );
    let s = Server::with_config(&cfg);
    (d, s)
}

fn site_with_big(limits: &str) -> (TempDir, Server) {
    let d = TempDir::new("timeouts-big");
    d.write("www/big.bin", pattern(BIG, 21));
    let cfg = d.config(
        "stoa.toml",
        &format!(
            "[limits]\n{limits}\n[cache]\nmax_file_bytes = 65536\n\n[[site]]\nroot = \"www\"\n"
        ),
    );
    let s = Server::with_config(&cfg);
    (d, s)
}

/// Whatever arrived before a timeout close must be nothing, or one complete
/// and well-framed 408.
fn assert_nothing_or_a_complete_408(bytes: Vec<u8>) {
    if bytes.is_empty() {
        return;
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    assert!(
        text.starts_with("HTTP/1.1 408"),
        "unexpected bytes: {text:?}"
    );
    let head_end = find(&bytes, b"\r\n\r\n").expect("a complete 408 head") + 4;
    let head = &text[..head_end];
    let cl: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().expect("numeric Content-Length"))
        })
        .unwrap_or(0);
    assert_eq!(
        bytes.len() - head_end,
        cl,
        "the 408 promises {cl} body bytes but carries {}: {text:?}",
        bytes.len() - head_end
    );
}

#[test]
fn a_client_stalling_in_the_middle_of_its_head_gets_408_or_a_close_cve_2007_6750() {
    let (_d, s) = site("header_timeout = \"1s\"\nkeepalive_timeout = \"1s\"\n");
    let mut c = s.connect();
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\n");
    let (took, bytes) = c
        .wait_closed(Duration::from_secs(5))
        .expect("the server must give up on a stalled head");
    assert!(
        took >= Duration::from_millis(700) && took <= Duration::from_millis(3500),
        "closed after {took:?}, header_timeout is 1s"
    );
    assert_nothing_or_a_complete_408(bytes);
}

#[test]
fn a_client_dripping_its_head_byte_by_byte_cannot_extend_the_header_timeout_cve_2007_6750() {
    let (_d, s) = site("header_timeout = \"1s\"\nkeepalive_timeout = \"1s\"\n");
    let mut c = s.connect();
    let mut w = c.stream.try_clone().expect("clone");
    let stop = Arc::new(AtomicBool::new(false));
    let t = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let head = format!(
                "GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Slow: {}",
                "s".repeat(200)
            );
            for b in head.bytes() {
                if stop.load(Ordering::Relaxed) || w.write_all(&[b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let closed = c.wait_closed(Duration::from_secs(6));
    stop.store(true, Ordering::Relaxed);
    let _ = t.join();
    let (took, bytes) = closed.expect("a dripping client must be cut off");
    assert!(
        took <= Duration::from_millis(3500),
        "closed only after {took:?}, header_timeout is 1s"
    );
    assert_nothing_or_a_complete_408(bytes);
}

#[test]
fn a_connection_that_never_sends_anything_is_closed_after_header_timeout() {
    let (_d, s) = site("header_timeout = \"1s\"\nkeepalive_timeout = \"10s\"\n");
    let mut c = s.connect();
    let (took, bytes) = c
        .wait_closed(Duration::from_secs(5))
        .expect("a silent connection must be closed");
    assert!(
        took >= Duration::from_millis(700) && took <= Duration::from_millis(3500),
        "closed after {took:?}"
    );
    assert_nothing_or_a_complete_408(bytes);
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_keepalive_timeout_rfc9112_9_5() {
    let (_d, s) = site("header_timeout = \"10s\"\nkeepalive_timeout = \"1s\"\n");
    let mut c = s.connect();
    assert_eq!(c.request(&get("/a.txt")).status, 200);
    let (took, bytes) = c
        .wait_closed(Duration::from_secs(5))
        .expect("an idle keep-alive connection must be closed");
    assert!(
        took >= Duration::from_millis(700) && took <= Duration::from_millis(3500),
        "closed after {took:?}, keepalive_timeout is 1s"
    );
    assert!(
        bytes.is_empty(),
        "an idle close needs no response: {:?}",
        String::from_utf8_lossy(&bytes)
    );
}

#[test]
fn a_keep_alive_connection_in_use_is_not_closed_by_keepalive_timeout_rfc9112_9_5() {
    let (_d, s) = site("header_timeout = \"10s\"\nkeepalive_timeout = \"1s\"\n");
    let mut c = s.connect();
    // Requests every 400 ms for 2.4 s: each one restarts the idle clock.
    for _ in 0..6 {
        assert_eq!(c.request(&get("/a.txt")).status, 200);
        std::thread::sleep(Duration::from_millis(400));
    }
}

#[test]
fn once_a_new_head_has_started_header_timeout_applies_not_keepalive_timeout() {
    let (_d, s) = site("header_timeout = \"4s\"\nkeepalive_timeout = \"1s\"\n");
    let mut c = s.connect();
    assert_eq!(c.request(&get("/a.txt")).status, 200);
    std::thread::sleep(Duration::from_millis(300));
    c.send(b"GET /a.txt HTTP/1.1\r\n");
    // Longer than keepalive_timeout, well within header_timeout.
    std::thread::sleep(Duration::from_millis(1500));
    c.send(b"Host: t\r\n\r\n");
    let r = c.read();
    assert_eq!(r.status, 200);
}

#[test]
fn a_client_stalling_inside_a_request_body_is_dropped_after_body_timeout() {
    let (_d, s) = site("body_timeout = \"1s\"\n");
    let mut c = s.connect();
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n0123456789");
    let (took, _bytes) = c
        .wait_closed(Duration::from_secs(5))
        .expect("a stalled body must end the connection");
    assert!(took <= Duration::from_millis(3500), "closed after {took:?}");
}

#[test]
fn a_client_that_stops_reading_is_dropped_after_send_timeout() {
    let (_d, s) = site_with_big("send_timeout = \"1s\"\n");
    let mut c = s.connect();
    c.set_recv_buffer(16 * 1024);
    c.send(&get("/big.bin"));
    std::thread::sleep(Duration::from_millis(3000));
    // Now drain: the server must have given up, so less than the whole
    // body arrives before the close.
    let mut total = 0usize;
    let mut buf = vec![0u8; 256 * 1024];
    let t0 = Instant::now();
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("read after {total} bytes: {e}"),
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "still sending");
    }
    assert!(
        total < BIG,
        "all {total} bytes arrived: the server never gave up on a non-reading client"
    );
}

#[test]
fn a_slow_but_steady_reader_is_not_cut_off_by_send_timeout() {
    // send_timeout is for clients that do not read; one that keeps reading
    // (here ~3 MB/s, about 4 s for the file) must get the whole response,
    // as with nginx's send_timeout, which is "set only between two
    // successive write operations".
    let (_d, s) = site_with_big("send_timeout = \"1s\"\n");
    let mut c = s.connect();
    c.set_recv_buffer(64 * 1024);
    c.send(&get("/big.bin"));
    let (head, body) = slow_download(&mut c, 64 * 1024, Duration::from_millis(20))
        .unwrap_or_else(|e| panic!("slow download cut short: {e}"));
    assert_eq!(head.status, 200);
    assert!(body == pattern(BIG, 21), "body differs");
}
