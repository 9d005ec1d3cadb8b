//! Per-response time stamps: every response is stamped when its own event
//! is handled, as wrk reads the clock per response, not once per `poll`
//! return. A server that answers its connections in bursts (here: all
//! waiting connections at once, one connection after the other, as a
//! single-threaded server without keep-alive does) delivers several
//! responses to one `epoll_wait`; a stamp per batch gave them identical
//! start/latency pairs in the per-request log.

mod common;

use common::{bench, tmpdir};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

const BODY: &[u8] = b"hello";

/// Reads one request head (up to the blank line) or gives up on EOF.
fn read_head(c: &mut TcpStream) -> bool {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    true
}

/// Serves `total` requests without keep-alive: takes every connection
/// already waiting, reads each request, then writes all their responses
/// back to back and closes them.
fn burst_server(l: TcpListener, total: usize) {
    let mut served = 0;
    while served < total {
        let Ok((first, _)) = l.accept() else { return };
        let mut conns = vec![first];
        l.set_nonblocking(true).expect("nonblocking listener");
        while let Ok((c, _)) = l.accept() {
            conns.push(c);
        }
        l.set_nonblocking(false).expect("blocking listener");
        let mut ready = Vec::new();
        for mut c in conns {
            let _ = c.set_nonblocking(false);
            if read_head(&mut c) {
                ready.push(c);
            }
        }
        for c in &mut ready {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                BODY.len()
            );
            let _ = c.write_all(head.as_bytes());
            let _ = c.write_all(BODY);
        }
        served += ready.len();
    }
}

#[test]
fn responses_delivered_in_one_burst_get_distinct_start_and_latency_stamps() {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let url = format!("http://{}/", l.local_addr().expect("local addr"));
    let total = 400;
    let server = thread::spawn(move || burst_server(l, total));
    let d = tmpdir("stamps");
    let log = d.join("requests.csv");
    let n = total.to_string();
    let (code, out, err) = bench(&[
        "-n",
        &n,
        "-c",
        "8",
        "--threads",
        "1",
        "--log",
        &log.to_string_lossy(),
        &url,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    server.join().expect("server thread");
    let text = std::fs::read_to_string(&log).expect("read the request log");
    // Lines: "start_s,latency_ms,status,...", maybe after a header line.
    let pairs: Vec<(String, String)> = text
        .lines()
        .filter(|l| l.split(',').nth(2) == Some("200"))
        .map(|l| {
            let mut f = l.split(',');
            (
                f.next().unwrap_or("").to_owned(),
                f.next().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(pairs.len(), total, "{text}");
    let distinct: HashSet<_> = pairs.iter().collect();
    // Each response's handling includes a close, a socket and a connect
    // (several µs of system calls) before the next one's clock read, so
    // the microsecond stamps of two responses never coincide.
    assert_eq!(
        distinct.len(),
        total,
        "identical start/latency pairs in the log:\n{text}"
    );
}
