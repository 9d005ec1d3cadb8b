//! `response_buffering` on a proxy route (nginx `proxy_buffering on` with
//! `proxy_max_temp_file_size`): the application's response is taken in
//! as fast as it comes (memory, then an unlinked temporary file) and its
//! connection and `capacity` slot are free while a slow client reads.

mod common;
mod proxy_peer;

use common::*;
use proxy_peer::Backend;
use std::time::{Duration, Instant};

/// Stoa with pool `app` (one request at a time: `capacity = 1`) on `b`
/// and a `/app/` proxy route with `route_keys`.
fn stoa(dir: &TempDir, b: &Backend, queue: &str, route_keys: &str) -> Server {
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"app\"\nprotocol = \"http\"\naddress = [\"{}\"]\ncapacity = 1\nqueue_timeout = \"{queue}\"\n\n\
             [[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/app/\"\n{route_keys}\nproxy = {{ pool = \"app\", strip_prefix = true }}\n",
            b.addr
        ),
    );
    Server::with_config(&cfg)
}

/// What backend.py's `/big?chunk=1000` sends at offset `i`: each 1000-byte
/// write starts the pattern again, so a piece out of order shows.
fn expected(i: usize) -> u8 {
    b"0123456789abcdef"[(i % 1000) % 16]
}

/// Asks for `size` bytes of `/big` and reads none of it yet: the
/// client's receive buffer is small, so without buffering the proxy (and
/// the application behind it) waits on this client.
fn stalled_download(s: &Server, query: &str) -> Conn {
    let mut c = s.connect();
    // Small enough that the client holds little, large enough (window
    // scaling) that reading it later is not throttled by delayed ACKs.
    c.set_recv_buffer(256 << 10);
    c.send(
        format!("GET /app/big?{query} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes(),
    );
    c
}

/// Reads the rest of a response whose head has not been read yet, and
/// checks its body against the pattern.
fn finish_download(mut c: Conn, size: usize) {
    let r = c.read();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), size, "whole body");
    if let Some(i) = (0..size).find(|&i| r.body[i] != expected(i)) {
        panic!("body differs at byte {i}");
    }
}

/// nginx `proxy_buffering on`: "the response is read from the proxied
/// server as soon as possible" and the connection is freed; here a
/// single-capacity application serves a second request while the first
/// client has not read a byte of its 48 MiB response, which is then
/// delivered whole from memory and the temporary file.
#[test]
fn a_slow_client_does_not_hold_the_application_when_responses_are_buffered() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("buffering-on");
    let s = stoa(&dir, &b, "10s", "response_buffering = true");
    let size = 48 << 20;
    let slow = stalled_download(&s, &format!("size={size}&chunk=1000"));
    b.wait_requests(1);
    let t = Instant::now();
    let r = s.get("/app/second");
    assert_eq!(r.status, 200, "{}", s.stderr());
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    finish_download(slow, size);
}

/// Without it (the default, nginx `proxy_buffering off` / Caddy's
/// streaming), the same slow client holds the only slot: the second
/// request waits its `queue_timeout` and gets 503. This is what the
/// setting is for.
#[test]
fn without_response_buffering_a_slow_client_holds_the_applications_slot() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("buffering-off");
    let s = stoa(&dir, &b, "1s", "");
    // More than the socket buffers between them hold (a few MiB each
    // way on loopback).
    let size = 48 << 20;
    let slow = stalled_download(&s, &format!("size={size}&chunk=1000"));
    // Stoa took the slot before it sent the request.
    b.wait_requests(1);
    let r = s.get("/app/second");
    assert_eq!(r.status, 503, "{}", r.text());
    finish_download(slow, size);
}

/// nginx: beyond `proxy_max_temp_file_size` "the rest of the response
/// is passed synchronously"; here beyond `disk` what was buffered goes
/// first and the rest streams with backpressure: a chunked response
/// arrives whole and in order, and the slot stays held meanwhile.
#[test]
fn beyond_the_disk_bound_the_buffered_part_goes_first_and_the_rest_streams() {
    let b = Backend::start(&[]);
    let dir = TempDir::new("buffering-bound");
    let s = stoa(
        &dir,
        &b,
        "1s",
        "response_buffering = { memory = \"64k\", disk = \"256k\" }",
    );
    let size = 48 << 20;
    let slow = stalled_download(&s, &format!("size={size}&chunk=1000&chunked=1"));
    b.wait_requests(1);
    let r = s.get("/app/second");
    assert_eq!(r.status, 503, "{}", r.text());
    finish_download(slow, size);
    // A small response fits in memory and goes as usual.
    let r = s.get("/app/big?size=3000&chunk=1000");
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 3000);
    assert!((0..3000).all(|i| r.body[i] == expected(i)));
}

/// A route that is not a proxy cannot buffer responses: refused at load.
#[test]
fn response_buffering_on_a_route_that_is_not_a_proxy_fails_the_load() {
    let dir = TempDir::new("buffering-static");
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        "[[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/\"\nresponse_buffering = true\nstatic = {}\n",
    );
    let o = std::process::Command::new(stoa_bin())
        .args(["check", cfg.to_str().expect("utf-8")])
        .output()
        .expect("stoa check");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("response_buffering"),
        "{err}"
    );
}
