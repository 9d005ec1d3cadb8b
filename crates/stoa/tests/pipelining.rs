//! Pipelining (RFC 9112 §9.3.2): requests sent back to back on one
//! connection are answered in order.

mod common;
use common::*;
use std::time::Duration;

fn site(n: usize) -> (TempDir, Server) {
    let d = TempDir::new("pipelining");
    for i in 0..n {
        d.write(
            &format!("f{i}.txt"),
            format!("file number {i}\n").repeat(i + 1),
        );
    }
    d.write("big.bin", pattern(600 * 1024, 5));
    let s = Server::serve_dir(d.path());
    (d, s)
}

fn body_of(i: usize) -> Vec<u8> {
    format!("file number {i}\n").repeat(i + 1).into_bytes()
}

#[test]
fn twenty_gets_in_one_write_are_answered_in_order_rfc9112_9_3_2() {
    let (_d, s) = site(20);
    let mut c = s.connect();
    let mut all = Vec::new();
    for i in 0..20 {
        all.extend_from_slice(&get(&format!("/f{i}.txt")));
    }
    c.send(&all);
    for i in 0..20 {
        let r = c.read();
        assert_eq!(r.status, 200, "response {i}");
        assert_eq!(r.body, body_of(i), "response {i} out of order");
    }
    assert!(c.stays_silent(Duration::from_millis(200)));
    // And the connection is still usable.
    assert_eq!(c.request(&get("/f3.txt")).body, body_of(3));
}

#[test]
fn a_mix_of_get_and_head_is_answered_in_order_rfc9112_9_3_2() {
    let (_d, s) = site(10);
    let mut c = s.connect();
    let mut all = Vec::new();
    for i in 0..10 {
        let m = if i % 2 == 0 { "GET" } else { "HEAD" };
        all.extend_from_slice(&request(m, &format!("/f{i}.txt"), &[]));
    }
    c.send(&all);
    for i in 0..10 {
        if i % 2 == 0 {
            let r = c.read();
            assert_eq!(r.status, 200);
            assert_eq!(r.body, body_of(i), "GET {i}");
        } else {
            let r = c.read_head();
            assert_eq!(r.status, 200);
            assert_eq!(
                r.content_length(),
                Some(body_of(i).len() as u64),
                "HEAD {i}"
            );
        }
    }
    assert!(c.stays_silent(Duration::from_millis(200)));
}

#[test]
fn errors_in_the_middle_of_a_pipeline_do_not_break_it_rfc9112_9_3_2() {
    let (_d, s) = site(3);
    let mut c = s.connect();
    let mut all = get("/f0.txt");
    all.extend_from_slice(&get("/missing.txt"));
    all.extend_from_slice(&request("DELETE", "/f1.txt", &[]));
    all.extend_from_slice(&request("GET", "/f1.txt", &["Range: bytes=99999-"]));
    all.extend_from_slice(&get("/f2.txt"));
    c.send(&all);
    let statuses: Vec<u16> = (0..5).map(|_| c.read().status).collect();
    assert_eq!(statuses, [200, 404, 405, 416, 200]);
}

#[test]
fn large_and_small_responses_interleave_in_order_rfc9112_9_3_2() {
    let (_d, s) = site(2);
    let big = pattern(600 * 1024, 5);
    let mut c = s.connect();
    let mut all = get("/f0.txt");
    all.extend_from_slice(&get("/big.bin"));
    all.extend_from_slice(&get("/f1.txt"));
    all.extend_from_slice(&get("/big.bin"));
    c.send(&all);
    assert_eq!(c.read().body, body_of(0));
    assert!(c.read().body == big);
    assert_eq!(c.read().body, body_of(1));
    assert!(c.read().body == big);
}

#[test]
fn a_pipeline_ending_in_connection_close_is_answered_then_closed_rfc9112_9_6() {
    let (_d, s) = site(3);
    let mut c = s.connect();
    let mut all = get("/f0.txt");
    all.extend_from_slice(&request("GET", "/f1.txt", &["Connection: close"]));
    all.extend_from_slice(&get("/f2.txt"));
    c.send(&all);
    assert_eq!(c.read().body, body_of(0));
    let r = c.read();
    assert_eq!(r.body, body_of(1));
    assert!(r.has_token("connection", "close"));
    let (_, rest) = c
        .wait_closed(Duration::from_secs(4))
        .expect("closed after Connection: close");
    assert!(
        rest.is_empty(),
        "a request after Connection: close was answered: {:?}",
        String::from_utf8_lossy(&rest)
    );
}

#[test]
fn a_malformed_request_in_a_pipeline_ends_it_after_the_good_ones_rfc9112_9_3_2() {
    let (_d, s) = site(2);
    let mut c = s.connect();
    let mut all = get("/f0.txt");
    all.extend_from_slice(&get("/f1.txt"));
    all.extend_from_slice(b"BROKEN\r\n\r\n");
    all.extend_from_slice(&get("/f0.txt"));
    c.send(&all);
    assert_eq!(c.read().body, body_of(0));
    assert_eq!(c.read().body, body_of(1));
    assert_eq!(c.read().status, 400);
    let (_, rest) = c.wait_closed(Duration::from_secs(4)).expect("closed");
    assert!(rest.is_empty());
}

#[test]
fn a_pipeline_split_mid_request_across_writes_is_reassembled_rfc9112_9_3_2() {
    let (_d, s) = site(4);
    let mut c = s.connect();
    let mut all = Vec::new();
    for i in 0..4 {
        all.extend_from_slice(&get(&format!("/f{i}.txt")));
    }
    for piece in all.chunks(7) {
        c.send(piece);
        std::thread::sleep(Duration::from_millis(2));
    }
    for i in 0..4 {
        assert_eq!(c.read().body, body_of(i));
    }
}

#[test]
fn a_thousand_pipelined_requests_are_all_answered_rfc9112_9_3_2() {
    let (_d, s) = site(5);
    let mut c = s.connect();
    let mut all = Vec::new();
    for i in 0..1000 {
        all.extend_from_slice(&get(&format!("/f{}.txt", i % 5)));
    }
    // Write from a thread: the server may answer before all is sent.
    let mut w = c.stream.try_clone().expect("clone");
    let t = std::thread::spawn(move || {
        use std::io::Write;
        w.write_all(&all)
    });
    for i in 0..1000 {
        let r = c.read();
        assert_eq!(r.body, body_of(i % 5), "response {i}");
    }
    t.join().expect("writer").expect("write");
}

/// After a read that returns less than the buffer had room for, the server
/// stops trusting the socket's read readiness (issue 16: it skips the read
/// that would fail with EAGAIN). A request that arrives right after such a
/// short read (before, while or after the server clears readiness) must
/// still wake it. Each round sends the first request, then the second one
/// after a pause that sweeps the window around the server's read, on one
/// keep-alive connection; a lost wake-up shows as a read timeout.
#[test]
fn a_request_arriving_just_after_a_short_read_is_answered_rfc9112_9_3() {
    let (_d, s) = site(2);
    let mut c = s.connect();
    let first = get("/f0.txt");
    let second = get("/f1.txt");
    for round in 0..400u64 {
        c.send(&first);
        // 0 to ~200 µs: the server's recvfrom and readiness clearing take a
        // few µs, so some rounds land on each side of them.
        let pause = Duration::from_micros((round * 37) % 211);
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
        c.send(&second);
        assert_eq!(c.read().body, body_of(0), "round {round}");
        assert_eq!(c.read().body, body_of(1), "round {round}");
    }
}

/// The same with the second request split across two writes, so that the
/// short read sees only a partial head and the rest arrives later.
#[test]
fn the_rest_of_a_head_arriving_after_a_short_read_is_answered_rfc9112_9_3() {
    let (_d, s) = site(2);
    let mut c = s.connect();
    let req = get("/f1.txt");
    for round in 0..200u64 {
        let cut = 1 + (round as usize % (req.len() - 1));
        c.send(&req[..cut]);
        std::thread::sleep(Duration::from_micros((round * 53) % 307));
        c.send(&req[cut..]);
        assert_eq!(c.read().body, body_of(1), "round {round}, cut at {cut}");
    }
}
