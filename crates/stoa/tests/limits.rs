//! Connection limits: past `max_connections` a new client is refused
//! (503, RFC 9110 §15.6.4) without disturbing the established ones.

mod common;
use common::*;
use std::time::{Duration, Instant};

fn site(max: usize) -> (TempDir, Server) {
    let d = TempDir::new("limits");
    d.write("www/a.txt", "alpha\n");
    let cfg = d.config(
        "stoa.toml",
        &format!("[limits]\nmax_connections = {max}\n\n[[site]]\nroot = \"www\"\n"),
    );
    let s = Server::with_config(&cfg);
    (d, s)
}

/// Tries one request on a new connection; Ok(status) or Err(what happened).
fn try_get(s: &Server) -> Result<u16, String> {
    let mut c = Conn::try_connect(s.addr).map_err(|e| format!("connect: {e}"))?;
    // The refusal may already be on its way; a failed write is fine.
    let _ = c.try_send(&get("/a.txt"));
    c.try_read_final()
        .map(|r| r.status)
        .map_err(|e| format!("read: {e}"))
}

#[test]
fn a_connection_past_max_connections_is_refused_and_the_others_keep_working_rfc9110_15_6_4() {
    let (_d, s) = site(3);
    let mut open: Vec<Conn> = (0..3).map(|_| s.connect()).collect();
    for c in open.iter_mut() {
        assert_eq!(c.request(&get("/a.txt")).status, 200);
    }
    // The fourth: 503, or closed without any 200.
    match try_get(&s) {
        Ok(503) | Err(_) => {}
        Ok(st) => panic!("a 4th connection got {st} with max_connections = 3"),
    }
    // The first three are untouched.
    for c in open.iter_mut() {
        let r = c.request(&get("/a.txt"));
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"alpha\n");
    }
    // Closing one makes room again (the server notices the close).
    drop(open.pop());
    let t0 = Instant::now();
    loop {
        match try_get(&s) {
            Ok(200) => break,
            other => assert!(
                t0.elapsed() < Duration::from_secs(3),
                "no room after a close: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_503_refusal_is_a_complete_response_that_closes_rfc9110_15_6_4() {
    let (_d, s) = site(1);
    let mut first = s.connect();
    assert_eq!(first.request(&get("/a.txt")).status, 200);
    let mut c = s.connect();
    let _ = c.try_send(&get("/a.txt"));
    match c.try_read_final() {
        Ok(r) => {
            assert_eq!(r.status, 503, "{r:?}");
            assert!(r.has_token("connection", "close"));
            assert!(r.header("retry-after").is_some());
            assert!(c.wait_closed(Duration::from_secs(3)).is_some());
        }
        // A reset before the 503 could be read is a refusal too.
        Err(e) => assert!(
            e.kind() == std::io::ErrorKind::ConnectionReset
                || e.kind() == std::io::ErrorKind::UnexpectedEof,
            "{e}"
        ),
    }
    assert_eq!(first.request(&get("/a.txt")).status, 200);
}

#[test]
fn connections_closed_by_the_server_free_their_slot() {
    let (_d, s) = site(2);
    // Each uses Connection: close, so the server ends them itself.
    for i in 0..10 {
        let r = s.request(&request("GET", "/a.txt", &["Connection: close"]));
        assert_eq!(r.status, 200, "request {i}");
    }
    // And after errors that close the connection.
    for i in 0..5 {
        let r = s.request(b"BROKEN\r\n\r\n");
        assert_eq!(r.status, 400, "bad request {i}");
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(try_get(&s), Ok(200));
}
