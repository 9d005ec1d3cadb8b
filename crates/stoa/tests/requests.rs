//! Request heads: syntax (RFC 9112 §2–§5), size limits (RFC 9110 §15.5.15,
//! RFC 6585 §5), versions, Host, methods and Expect.

mod common;
use common::*;
use std::time::Duration;

fn site() -> (TempDir, Server) {
    let d = TempDir::new("requests");
    d.write("index.html", "<p>home</p>\n");
    d.write("a.txt", "alpha\n");
    let s = Server::serve_dir(d.path());
    (d, s)
}

/// One exchange on a fresh connection; the response must be `status` and
/// the server must then close (the stream after a bad head is untrusted).
fn answered_then_closed(s: &Server, bytes: &[u8], status: u16) -> Response {
    let mut c = s.connect();
    let r = c.request(bytes);
    assert_eq!(r.status, status, "response: {r:?}");
    assert!(r.has_token("connection", "close"), "{r:?}");
    assert!(
        c.wait_closed(Duration::from_secs(4)).is_some(),
        "connection left open after {status}"
    );
    r
}

#[test]
fn a_garbage_request_line_is_400_rfc9112_3() {
    let (_d, s) = site();
    answered_then_closed(&s, b"HELLO THERE\r\n\r\n", 400);
}

#[test]
fn a_request_line_with_two_spaces_is_400_rfc9112_3() {
    let (_d, s) = site();
    answered_then_closed(&s, b"GET  /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", 400);
}

#[test]
fn a_header_line_without_a_colon_is_400_rfc9112_5() {
    let (_d, s) = site();
    answered_then_closed(
        &s,
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nNo colon here\r\n\r\n",
        400,
    );
}

#[test]
fn obsolete_line_folding_is_rejected_rfc9112_5_2() {
    let (_d, s) = site();
    let mut c = s.connect();
    let r = c.request(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Long: a\r\n b\r\n\r\n");
    // §5.2 allows replacing the fold with spaces instead; refusing is the
    // safe choice, and what must never happen is a folded line taken as a
    // new header field.
    assert!(r.status == 400 || r.status == 200, "{r:?}");
}

#[test]
fn a_too_long_uri_is_414_rfc9110_15_5_15() {
    let (_d, s) = site();
    let path = format!("/{}", "a".repeat(9000));
    let r = answered_then_closed(&s, &get(&path), 414);
    assert!(r.text().contains("414"));
}

#[test]
fn a_too_long_uri_still_arriving_is_414_before_the_line_ends_rfc9110_15_5_15() {
    let (_d, s) = site();
    let mut c = s.connect();
    let mut line = b"GET /".to_vec();
    line.extend_from_slice(&[b'a'; 12_000]);
    c.send(&line);
    let r = c.read();
    assert_eq!(r.status, 414);
}

#[test]
fn too_large_header_fields_are_431_rfc6585_5() {
    let (_d, s) = site();
    let big = format!("X-Big: {}", "b".repeat(20_000));
    answered_then_closed(&s, &request("GET", "/a.txt", &[&big]), 431);
}

#[test]
fn too_many_header_fields_are_431_rfc6585_5() {
    let (_d, s) = site();
    let many: Vec<String> = (0..150).map(|i| format!("X-H{i}: v")).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    answered_then_closed(&s, &request("GET", "/a.txt", &refs), 431);
}

#[test]
fn an_http_2_0_request_line_is_505_rfc9110_15_6_6() {
    let (_d, s) = site();
    answered_then_closed(&s, b"GET /a.txt HTTP/2.0\r\nHost: t\r\n\r\n", 505);
}

#[test]
fn a_higher_minor_version_is_served_as_http_1_1_rfc9110_2_5() {
    let (_d, s) = site();
    let mut c = s.connect();
    for version in ["HTTP/1.2", "HTTP/1.9"] {
        let r = c.request(format!("GET /a.txt {version}\r\nHost: t\r\n\r\n").as_bytes());
        assert_eq!(r.status, 200, "{version}: {r:?}");
        assert_eq!(r.version, "HTTP/1.1", "{version}: {r:?}");
        assert_eq!(r.body, b"alpha\n");
        // Persistent, as HTTP/1.1 is: the next request goes on this connection.
        assert!(!r.has_token("connection", "close"), "{version}: {r:?}");
    }
    // As HTTP/1.1, it needs a Host.
    answered_then_closed(&s, b"GET /a.txt HTTP/1.2\r\n\r\n", 400);
}

#[test]
fn http_1_1_without_host_is_400_rfc9112_3_2() {
    let (_d, s) = site();
    answered_then_closed(&s, b"GET /a.txt HTTP/1.1\r\n\r\n", 400);
}

#[test]
fn two_host_headers_are_400_rfc9112_3_2() {
    let (_d, s) = site();
    answered_then_closed(
        &s,
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nHost: u\r\n\r\n",
        400,
    );
}

#[test]
fn a_host_that_is_not_uri_host_and_port_is_400_rfc9112_3_2_rfc9110_7_2() {
    let (_d, s) = site();
    for host in [
        "../../etc/x y",
        "..",
        "a/b",
        "a:b",
        "u@t",
        "[::1",
        "t:80:80",
        "t%zz",
    ] {
        let req = format!("GET /a.txt HTTP/1.1\r\nHost: {host}\r\n\r\n");
        answered_then_closed(&s, req.as_bytes(), 400);
        // HTTP/1.0 may omit Host, but one it sends must be valid.
        let req = format!("GET /a.txt HTTP/1.0\r\nHost: {host}\r\n\r\n");
        answered_then_closed(&s, req.as_bytes(), 400);
    }
    for host in [
        "t",
        "t:8080",
        "127.0.0.1:1",
        "[::1]:80",
        "[::1]",
        "a-b.c_d~e",
        "",
    ] {
        let r = s.request(format!("GET /a.txt HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
        assert_eq!(r.status, 200, "Host: {host}: {r:?}");
    }
}

#[test]
fn an_absolute_form_target_with_a_bad_authority_is_400_rfc9112_3_2_2() {
    let (_d, s) = site();
    for target in [
        "http://a..b/a.txt",
        "http://t:x/a.txt",
        "http://t%zz/a.txt",
        "http:///a.txt",
    ] {
        let req = format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n");
        answered_then_closed(&s, req.as_bytes(), 400);
    }
}

#[test]
fn http_1_0_without_host_is_served_rfc9112_3_2() {
    let (_d, s) = site();
    let r = s.request(b"GET /a.txt HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"alpha\n");
}

#[test]
fn the_absolute_form_request_target_is_accepted_rfc9112_3_2_2() {
    // "A server MUST accept the absolute-form in requests" (RFC 9112 §3.2.2).
    let (_d, s) = site();
    let r = s.request(b"GET http://t/a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, b"alpha\n");
}

#[test]
fn post_put_delete_on_a_static_route_are_405_with_allow_rfc9110_15_5_6() {
    let (_d, s) = site();
    for m in ["POST", "PUT", "DELETE", "PATCH"] {
        let mut c = s.connect();
        let r = c.request(
            format!("{m} /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nbody").as_bytes(),
        );
        assert_eq!(r.status, 405, "{m}: {r:?}");
        assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS"), "{m}");
        // A 405 is not a framing error: the connection carries on.
        let r2 = c.request(&get("/a.txt"));
        assert_eq!(r2.status, 200, "after {m}");
    }
}

#[test]
fn options_is_204_with_allow_rfc9110_9_3_7() {
    let (_d, s) = site();
    let r = s.request(&request("OPTIONS", "/a.txt", &[]));
    assert_eq!(r.status, 204);
    assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS"));
    assert!(r.body.is_empty());
}

#[test]
fn options_asterisk_is_204_with_allow_rfc9110_9_3_7() {
    let (_d, s) = site();
    let mut c = s.connect();
    let r = c.request(&request("OPTIONS", "*", &[]));
    assert_eq!(r.status, 204, "{r:?}");
    assert!(r.header("allow").is_some());
    // A 204 has no body: the next response must parse.
    assert_eq!(c.request(&get("/a.txt")).status, 200);
}

#[test]
fn an_unknown_method_is_501_and_a_known_one_not_allowed_stays_405_rfc9110_9_1_15_6_2() {
    let (_d, s) = site();
    let mut c = s.connect();
    // RFC 9110 §15.6.2: 501 is for a method the server does not recognise
    // for any resource; the connection goes on (its framing is known).
    let r = c.request(&request("BREW", "/a.txt", &[]));
    assert_eq!(r.status, 501, "{r:?}");
    assert!(!contains(&r.body, b"alpha"));
    let r = c.request(
        &request("PROPFIND", "/", &["Content-Length: 3"])
            .into_iter()
            .chain(*b"abc")
            .collect::<Vec<u8>>(),
    );
    assert_eq!(r.status, 501, "{r:?}");
    // §15.5.6: a method it knows but the resource does not allow is 405.
    let r = c.request(&request("DELETE", "/a.txt", &[]));
    assert_eq!(r.status, 405, "{r:?}");
    assert_eq!(r.header("allow"), Some("GET, HEAD, OPTIONS"));
    assert_eq!(c.request(&get("/a.txt")).status, 200);
}

#[test]
fn a_request_target_with_a_fragment_is_400_rfc9112_3_2_rfc9110_4_1() {
    let (_d, s) = site();
    for target in ["/a.txt#frag", "/a.txt?x=1#f", "/#"] {
        let r = s.request(&get(target));
        assert_eq!(r.status, 400, "{target}: {r:?}");
        assert!(!contains(&r.body, b"alpha"), "{target}");
    }
    // An encoded `#` is part of the path: no such file, not a bad request.
    assert_eq!(s.get("/a.txt%23frag").status, 404);
}

#[test]
fn expect_100_continue_on_get_without_body_gets_the_final_response_rfc9110_10_1_1() {
    let (_d, s) = site();
    let mut c = s.connect();
    let r = c.request(&request("GET", "/a.txt", &["Expect: 100-continue"]));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"alpha\n");
}

#[test]
fn expect_100_continue_on_post_gets_a_final_status_without_sending_the_body_rfc9110_10_1_1() {
    let (_d, s) = site();
    let mut c = s.connect();
    // The body is never sent: the server must not wait for it.
    c.send(
        b"POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n",
    );
    let r = c.read_final();
    assert_eq!(r.status, 405, "{r:?}");
}

#[test]
fn expect_100_continue_on_get_with_a_body_gets_the_final_status_rfc9110_10_1_1() {
    let (_d, s) = site();
    let mut c = s.connect();
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    let r = c.read_final();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, b"alpha\n");
}

#[test]
fn an_unknown_expectation_is_417_rfc9110_10_1_1() {
    let (_d, s) = site();
    let r = s.request(&request("GET", "/a.txt", &["Expect: teapot"]));
    assert_eq!(r.status, 417);
}

#[test]
fn a_request_body_larger_than_max_body_bytes_is_413_rfc9110_15_5_14() {
    let d = TempDir::new("requests-413");
    d.write("www/a.txt", "alpha\n");
    let cfg = d.config(
        "stoa.toml",
        "[limits]\nmax_body_bytes = 1000\n\n[[site]]\nroot = \"www\"\n",
    );
    let s = Server::with_config(&cfg);
    let mut c = s.connect();
    c.send(b"POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n");
    c.send(&[b'x'; 1000]);
    let r = c.read();
    assert_eq!(r.status, 413, "{r:?}");
    assert!(r.has_token("connection", "close"));
    assert!(c.wait_closed(Duration::from_secs(4)).is_some());
    // A body within the limit is not refused as too large.
    let r = s.request(b"POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n0123456789");
    assert_eq!(r.status, 405);
}

#[test]
fn configured_uri_and_header_limits_apply_rfc9110_15_5_15_rfc6585_5() {
    let d = TempDir::new("requests-limits");
    d.write("www/a.txt", "alpha\n");
    let cfg = d.config(
        "stoa.toml",
        "[limits]\nmax_uri_bytes = 100\nmax_header_bytes = 1024\n\n[[site]]\nroot = \"www\"\n",
    );
    let s = Server::with_config(&cfg);
    assert_eq!(s.get(&format!("/{}", "a".repeat(150))).status, 414);
    assert_eq!(s.get(&format!("/a.txt?{}", "q".repeat(80))).status, 200);
    let big = format!("X-Big: {}", "b".repeat(1500));
    assert_eq!(s.request(&request("GET", "/a.txt", &[&big])).status, 431);
    let ok = format!("X-Big: {}", "b".repeat(500));
    assert_eq!(s.request(&request("GET", "/a.txt", &[&ok])).status, 200);
}

#[test]
fn leading_empty_lines_before_a_request_are_ignored_rfc9112_2_2() {
    let (_d, s) = site();
    let r = s.request(b"\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(r.status, 200);
}

#[test]
fn error_responses_have_a_complete_html_body() {
    let (_d, s) = site();
    let r = s.get("/missing.txt");
    assert_eq!(r.status, 404);
    assert_eq!(r.content_length(), Some(r.body.len() as u64));
    assert!(r
        .header("content-type")
        .unwrap_or("")
        .starts_with("text/html"));
    assert!(r.text().contains("404"));
}

#[test]
fn a_body_too_large_to_discard_still_gets_its_response_before_the_close_rfc9112_9_6() {
    // The server reads and drops small unwanted bodies to keep the
    // connection; a large one it may refuse to read, but the response must
    // still reach the client (lingering close) rather than be lost to a
    // reset.
    let (_d, s) = site();
    let mut c = s.connect();
    let len = 4 << 20;
    c.send(format!("POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: {len}\r\n\r\n").as_bytes());
    let mut w = c.stream.try_clone().expect("clone");
    let t = std::thread::spawn(move || {
        use std::io::Write;
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..(len / chunk.len()) {
            if w.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let r = c.read();
    assert_eq!(r.status, 405, "{r:?}");
    let _ = c.stream.shutdown(std::net::Shutdown::Both);
    let _ = t.join();
}
