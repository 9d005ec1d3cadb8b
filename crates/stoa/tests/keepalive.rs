//! Persistent connections (RFC 9112 §9.3): HTTP/1.1 keeps the connection
//! by default, HTTP/1.0 only with `Connection: keep-alive` (as ApacheBench
//! -k sends), and `Connection: close` closes (§9.6).

mod common;
use common::*;
use std::time::Duration;

fn site() -> (TempDir, Server) {
    let d = TempDir::new("keepalive");
    d.write("a.txt", "alpha\n");
    d.write("b.txt", "bravo\n");
    let s = Server::serve_dir(d.path());
    (d, s)
}

#[test]
fn http_1_0_closes_after_the_response_by_default_rfc9112_9_3() {
    let (_d, s) = site();
    let mut c = s.connect();
    let r = c.request(b"GET /a.txt HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"alpha\n");
    assert!(!r.has_token("connection", "keep-alive"));
    assert!(
        c.wait_closed(Duration::from_secs(3)).is_some(),
        "an HTTP/1.0 connection without keep-alive must be closed"
    );
}

#[test]
fn http_1_0_with_keep_alive_stays_open_and_says_so_rfc9112_appendix_c_2_2() {
    let (_d, s) = site();
    let mut c = s.connect();
    for (path, body) in [
        ("/a.txt", "alpha\n"),
        ("/b.txt", "bravo\n"),
        ("/a.txt", "alpha\n"),
    ] {
        let r =
            c.request(format!("GET {path} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").as_bytes());
        assert_eq!(r.status, 200);
        assert_eq!(r.body, body.as_bytes());
        assert!(
            r.has_token("connection", "keep-alive"),
            "HTTP/1.0 keep-alive must be confirmed: {r:?}"
        );
        assert!(r.content_length().is_some());
    }
    assert!(c.stays_silent(Duration::from_millis(200)));
}

#[test]
fn http_1_0_keep_alive_errors_also_carry_the_header_rfc9112_appendix_c_2_2() {
    let (_d, s) = site();
    let mut c = s.connect();
    let r = c.request(b"GET /missing HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(r.status, 404);
    assert!(r.has_token("connection", "keep-alive"), "{r:?}");
    c.send(b"HEAD /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = c.read_head();
    assert_eq!(r.status, 200);
    assert!(r.has_token("connection", "keep-alive"), "{r:?}");
    assert_eq!(
        c.request(b"GET /b.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .body,
        b"bravo\n"
    );
}

#[test]
fn http_1_0_responses_use_a_1_1_version_with_content_length_rfc9110_6_2() {
    let (_d, s) = site();
    let r = s.request(b"GET /a.txt HTTP/1.0\r\n\r\n");
    assert!(r.version == "HTTP/1.1" || r.version == "HTTP/1.0", "{r:?}");
    assert!(
        r.header("transfer-encoding").is_none(),
        "no chunked coding to a 1.0 client"
    );
    assert_eq!(r.content_length(), Some(6));
}

#[test]
fn http_1_1_keeps_the_connection_by_default_rfc9112_9_3() {
    let (_d, s) = site();
    let mut c = s.connect();
    for _ in 0..5 {
        let r = c.request(&get("/a.txt"));
        assert_eq!(r.status, 200);
        assert!(!r.has_token("connection", "close"));
    }
}

#[test]
fn http_1_1_connection_close_is_echoed_and_the_server_closes_rfc9112_9_6() {
    let (_d, s) = site();
    let mut c = s.connect();
    let r = c.request(&request("GET", "/a.txt", &["Connection: close"]));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"alpha\n");
    assert!(r.has_token("connection", "close"), "{r:?}");
    assert!(c.wait_closed(Duration::from_secs(3)).is_some());
}

#[test]
fn connection_close_among_other_tokens_is_honoured_rfc9110_7_6_1() {
    let (_d, s) = site();
    let mut c = s.connect();
    let r = c.request(&request("GET", "/a.txt", &["Connection: TE, Close"]));
    assert!(r.has_token("connection", "close"));
    assert!(c.wait_closed(Duration::from_secs(3)).is_some());
}

#[test]
fn a_client_closing_its_side_still_gets_the_response_rfc9112_9_6() {
    let (_d, s) = site();
    let mut c = s.connect();
    c.send(&get("/a.txt"));
    c.stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    let r = c.read();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"alpha\n");
}

#[test]
fn a_connection_idle_past_the_park_delay_serves_its_next_requests_rfc9112_9_3() {
    // After 250 ms without a request an idle keep-alive connection leaves
    // its task (nginx frees an idle connection's buffers the same way);
    // its next request must be answered as on any kept-alive connection,
    // and it must still be kept alive after that.
    let (_d, s) = site();
    let mut c = s.connect();
    assert_eq!(c.request(&get("/a.txt")).body, b"alpha\n");
    for (path, body) in [("/b.txt", "bravo\n"), ("/a.txt", "alpha\n")] {
        std::thread::sleep(Duration::from_millis(600));
        let r = c.request(&get(path));
        assert_eq!(r.status, 200);
        assert_eq!(r.body, body.as_bytes());
    }
    // A pipelined pair sent to a parked connection comes back in order.
    std::thread::sleep(Duration::from_millis(600));
    let mut two = get("/b.txt");
    two.extend_from_slice(&get("/a.txt"));
    c.send(&two);
    assert_eq!(c.read().body, b"bravo\n");
    assert_eq!(c.read().body, b"alpha\n");
    assert!(c.stays_silent(Duration::from_millis(200)));
}

#[test]
fn a_parked_connection_the_client_closes_is_let_go() {
    // The client's FIN wakes a parked connection like a request would; the
    // server reads the end and closes its side too (no half-open socket
    // left behind), then serves new connections as before.
    let (_d, s) = site();
    let mut c = s.connect();
    assert_eq!(c.request(&get("/a.txt")).status, 200);
    std::thread::sleep(Duration::from_millis(600));
    c.stream
        .shutdown(std::net::Shutdown::Write)
        .expect("shutdown");
    assert!(
        c.wait_closed(Duration::from_secs(3)).is_some(),
        "the server must close a parked connection the client ended"
    );
    assert_eq!(s.get("/b.txt").status, 200);
}
