//! Request smuggling: message framing must be unambiguous (RFC 9112 §6.1,
//! §6.3), the CVE-2005-2088 family (CL.TE, TE.CL, CL.CL).

mod common;
use common::*;
use std::time::Duration;

fn site() -> (TempDir, Server) {
    let d = TempDir::new("smuggling");
    d.write("a.txt", "alpha\n");
    d.write("b.txt", "bravo\n");
    d.write("secret.txt", "smuggled\n");
    let s = Server::serve_dir(d.path());
    (d, s)
}

/// Sends `bytes`, expects one response with `status`, then the server
/// closing the connection without answering anything else.
fn refused_and_closed(bytes: &[u8], status: u16) {
    let (_d, s) = site();
    let mut c = s.connect();
    let r = c.request(bytes);
    assert_eq!(r.status, status, "response: {r:?}");
    assert!(
        r.has_token("connection", "close"),
        "a framing error must announce the close: {r:?}"
    );
    let (_, rest) = c
        .wait_closed(Duration::from_secs(4))
        .expect("the server must close the connection after a framing error");
    assert!(
        !contains(&rest, b"HTTP/1.1 200"),
        "nothing after the error may be answered: {:?}",
        String::from_utf8_lossy(&rest)
    );
}

#[test]
fn content_length_with_transfer_encoding_is_rejected_and_closes_rfc9112_6_3_cve_2005_2088() {
    refused_and_closed(
        b"POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 37\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /secret.txt HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
    );
}

#[test]
fn transfer_encoding_before_content_length_is_rejected_too_rfc9112_6_3() {
    refused_and_closed(
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\nGET /secret.txt HTTP/1.1\r\nHost: t\r\n\r\n",
        400,
    );
}

#[test]
fn differing_duplicate_content_lengths_are_rejected_and_close_rfc9112_6_3_item_5() {
    refused_and_closed(
        b"POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        400,
    );
}

#[test]
fn a_content_length_list_with_differing_values_is_rejected_rfc9112_6_3_item_5() {
    refused_and_closed(
        b"POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 6\r\n\r\nhello!",
        400,
    );
}

#[test]
fn a_signed_content_length_is_rejected_rfc9110_8_6() {
    refused_and_closed(
        b"POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: +5\r\n\r\nhello",
        400,
    );
}

#[test]
fn identical_duplicate_content_lengths_are_one_length_rfc9112_6_3_item_5() {
    let (_d, s) = site();
    let mut c = s.connect();
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nxyzGET /b.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let r1 = c.read();
    assert_eq!(r1.status, 200);
    assert_eq!(r1.body, b"alpha\n");
    let r2 = c.read();
    assert_eq!(r2.status, 200);
    assert_eq!(r2.body, b"bravo\n");
}

#[test]
fn an_unknown_transfer_coding_is_not_implemented_rfc9112_6_1() {
    refused_and_closed(
        b"POST /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        501,
    );
}

#[test]
fn chunked_that_is_not_the_final_coding_is_rejected_rfc9112_6_3_item_4() {
    refused_and_closed(
        b"POST /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
        400,
    );
}

#[test]
fn chunked_given_twice_across_header_lines_is_rejected_rfc9112_6_3_item_4() {
    refused_and_closed(
        b"POST /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    );
}

#[test]
fn transfer_encoding_in_http_1_0_is_faulty_framing_rfc9112_6_1() {
    refused_and_closed(
        b"POST /a.txt HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    );
}

#[test]
fn whitespace_between_header_name_and_colon_is_rejected_rfc9112_5_1() {
    refused_and_closed(
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        400,
    );
}

#[test]
fn a_chunked_body_on_get_is_discarded_and_the_next_pipelined_request_is_answered_rfc9112_6_3() {
    let (_d, s) = site();
    let mut c = s.connect();
    // The chunk data looks like a request: if the body were parsed as one,
    // /secret.txt would be answered.
    let smuggled = b"GET /secret.txt HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut req = b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    req.extend_from_slice(format!("{:x};ext=1\r\n", smuggled.len()).as_bytes());
    req.extend_from_slice(smuggled);
    req.extend_from_slice(b"\r\n0\r\nX-Trailer: yes\r\n\r\n");
    req.extend_from_slice(b"GET /b.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    c.send(&req);
    let r1 = c.read();
    assert_eq!((r1.status, r1.body.as_slice()), (200, &b"alpha\n"[..]));
    let r2 = c.read();
    assert_eq!((r2.status, r2.body.as_slice()), (200, &b"bravo\n"[..]));
    assert!(
        c.stays_silent(Duration::from_millis(300)),
        "a third response means the body was parsed as a request: {:?}",
        String::from_utf8_lossy(c.pending())
    );
    // The connection is still usable.
    let r3 = c.request(&get("/a.txt"));
    assert_eq!(r3.status, 200);
}

#[test]
fn a_content_length_body_on_get_is_discarded_and_the_next_pipelined_request_is_answered_rfc9112_6_3(
) {
    let (_d, s) = site();
    let mut c = s.connect();
    let smuggled = b"GET /secret.txt HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut req = format!(
        "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        smuggled.len()
    )
    .into_bytes();
    req.extend_from_slice(smuggled);
    req.extend_from_slice(b"GET /b.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    c.send(&req);
    let r1 = c.read();
    assert_eq!((r1.status, r1.body.as_slice()), (200, &b"alpha\n"[..]));
    let r2 = c.read();
    assert_eq!((r2.status, r2.body.as_slice()), (200, &b"bravo\n"[..]));
    assert!(
        c.stays_silent(Duration::from_millis(300)),
        "a third response means the body was parsed as a request: {:?}",
        String::from_utf8_lossy(c.pending())
    );
}

#[test]
fn a_body_split_across_writes_is_still_discarded_exactly_rfc9112_6_3() {
    let (_d, s) = site();
    let mut c = s.connect();
    let smuggled = b"GET /secret.txt HTTP/1.1\r\nHost: t\r\n\r\n";
    c.send(
        format!(
            "POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n0123456789",
            10 + smuggled.len()
        )
        .as_bytes(),
    );
    std::thread::sleep(Duration::from_millis(100));
    c.send(smuggled);
    std::thread::sleep(Duration::from_millis(100));
    c.send(b"GET /b.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let r1 = c.read();
    assert_eq!(r1.status, 405);
    let r2 = c.read();
    assert_eq!((r2.status, r2.body.as_slice()), (200, &b"bravo\n"[..]));
}

#[test]
fn a_bare_lf_in_a_chunk_size_line_closes_the_connection_rfc9112_7_1() {
    let (_d, s) = site();
    let mut c = s.connect();
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5;x\nhello\r\n0\r\n\r\nGET /secret.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let (_, rest) = c
        .wait_closed(Duration::from_secs(4))
        .expect("a broken chunked body must end the connection");
    assert!(
        !contains(&rest, b"smuggled"),
        "the request after a broken body must not be answered: {:?}",
        String::from_utf8_lossy(&rest)
    );
}

#[test]
fn an_invalid_chunk_size_closes_the_connection_without_answering_what_follows_rfc9112_7_1() {
    let (_d, s) = site();
    let mut c = s.connect();
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET /secret.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    let (_, rest) = c
        .wait_closed(Duration::from_secs(4))
        .expect("a broken chunked body must end the connection");
    assert!(!contains(&rest, b"smuggled"));
}
