//! Conditional requests (RFC 9110 §13): preconditions evaluated in the
//! order of §13.2.2, 304 Not Modified (§15.4.5) and 412 Precondition Failed
//! (§15.5.13).

mod common;
use common::*;
use std::fs::File;
use std::time::{Duration, UNIX_EPOCH};

const MTIME: u64 = 1_577_836_800; // Wed, 01 Jan 2020 00:00:00 GMT
const LM: &str = "Wed, 01 Jan 2020 00:00:00 GMT";
const BEFORE: &str = "Tue, 31 Dec 2019 23:59:59 GMT";
const AFTER: &str = "Wed, 01 Jan 2020 00:00:01 GMT";

fn site() -> (TempDir, Server, String) {
    let d = TempDir::new("conditionals");
    let p = d.write("www/page.html", "<p>page</p>\n");
    d.write("www/big.bin", pattern(300 * 1024, 3));
    for f in [p, d.join("www/big.bin")] {
        File::options()
            .write(true)
            .open(&f)
            .and_then(|f| f.set_modified(UNIX_EPOCH + Duration::from_secs(MTIME)))
            .expect("set mtime");
    }
    let cfg = d.config("stoa.toml", "[[site]]\nroot = \"www\"\n");
    let s = Server::with_config(&cfg);
    let r = s.get("/page.html");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("last-modified"), Some(LM));
    let etag = r.header("etag").expect("ETag").to_owned();
    (d, s, etag)
}

/// GET with the given header lines, then a pipelined plain GET on the same
/// connection, so that a 304 that carried a body would be caught.
fn cond(s: &Server, path: &str, headers: &[&str]) -> Response {
    let mut c = s.connect();
    let mut both = request("GET", path, headers);
    both.extend_from_slice(&get("/page.html"));
    c.send(&both);
    let r = c.read();
    let next = c.read();
    assert_eq!(
        next.status, 200,
        "the follow-up request was garbled: {next:?}"
    );
    assert_eq!(next.body, b"<p>page</p>\n");
    r
}

#[test]
fn if_none_match_with_the_current_etag_is_304_without_a_body_rfc9110_13_1_2() {
    let (_d, s, etag) = site();
    let r = cond(&s, "/page.html", &[&format!("If-None-Match: {etag}")]);
    assert_eq!(r.status, 304, "{r:?}");
    assert!(r.body.is_empty());
    // A 304 carries the validators a 200 would have (RFC 9110 §15.4.5).
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    assert_eq!(r.header("content-length"), None, "{r:?}");
}

#[test]
fn if_none_match_matches_weakly_and_in_a_list_rfc9110_13_1_2() {
    let (_d, s, etag) = site();
    let r = cond(
        &s,
        "/page.html",
        &[&format!("If-None-Match: \"x\", W/{etag}")],
    );
    assert_eq!(r.status, 304);
    let r = cond(&s, "/page.html", &["If-None-Match: *"]);
    assert_eq!(r.status, 304);
}

#[test]
fn if_none_match_with_another_etag_is_200_rfc9110_13_1_2() {
    let (_d, s, _etag) = site();
    let r = cond(&s, "/page.html", &["If-None-Match: \"nope\""]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"<p>page</p>\n");
}

#[test]
fn if_none_match_on_head_is_304_rfc9110_13_1_2() {
    let (_d, s, etag) = site();
    let mut c = s.connect();
    c.send(&request(
        "HEAD",
        "/page.html",
        &[&format!("If-None-Match: {etag}")],
    ));
    let r = c.read_head();
    assert_eq!(r.status, 304);
    assert!(c.stays_silent(Duration::from_millis(200)));
}

#[test]
fn if_modified_since_equal_to_last_modified_is_304_rfc9110_13_1_3() {
    let (_d, s, _etag) = site();
    let r = cond(&s, "/page.html", &[&format!("If-Modified-Since: {LM}")]);
    assert_eq!(r.status, 304, "{r:?}");
    assert!(r.body.is_empty());
    let r = cond(&s, "/page.html", &[&format!("If-Modified-Since: {AFTER}")]);
    assert_eq!(r.status, 304);
}

#[test]
fn if_modified_since_before_last_modified_is_200_rfc9110_13_1_3() {
    let (_d, s, _etag) = site();
    let r = cond(&s, "/page.html", &[&format!("If-Modified-Since: {BEFORE}")]);
    assert_eq!(r.status, 200);
}

#[test]
fn if_modified_since_in_obsolete_date_formats_is_understood_rfc9110_5_6_7() {
    let (_d, s, _etag) = site();
    for date in [
        "Wednesday, 01-Jan-20 00:00:00 GMT",
        "Wed Jan  1 00:00:00 2020",
    ] {
        let r = cond(&s, "/page.html", &[&format!("If-Modified-Since: {date}")]);
        assert_eq!(r.status, 304, "{date}");
    }
}

#[test]
fn an_invalid_if_modified_since_is_ignored_rfc9110_13_1_3() {
    let (_d, s, _etag) = site();
    let r = cond(&s, "/page.html", &["If-Modified-Since: yesterday"]);
    assert_eq!(r.status, 200);
}

#[test]
fn if_none_match_takes_precedence_over_if_modified_since_rfc9110_13_2_2() {
    let (_d, s, etag) = site();
    // The tag does not match, the date would: the tag wins, 200.
    let r = cond(
        &s,
        "/page.html",
        &[
            "If-None-Match: \"other\"",
            &format!("If-Modified-Since: {LM}"),
        ],
    );
    assert_eq!(r.status, 200, "{r:?}");
    // The tag matches, the date would not: 304.
    let r = cond(
        &s,
        "/page.html",
        &[
            &format!("If-None-Match: {etag}"),
            &format!("If-Modified-Since: {BEFORE}"),
        ],
    );
    assert_eq!(r.status, 304);
}

#[test]
fn if_match_with_another_etag_is_412_rfc9110_13_1_1() {
    let (_d, s, _etag) = site();
    let r = cond(&s, "/page.html", &["If-Match: \"stale\""]);
    assert_eq!(r.status, 412, "{r:?}");
    assert!(!contains(&r.body, b"<p>page</p>"));
}

#[test]
fn if_match_with_the_current_etag_or_asterisk_is_200_rfc9110_13_1_1() {
    let (_d, s, etag) = site();
    assert_eq!(
        cond(&s, "/page.html", &[&format!("If-Match: {etag}")]).status,
        200
    );
    assert_eq!(cond(&s, "/page.html", &["If-Match: *"]).status, 200);
}

#[test]
fn if_match_uses_strong_comparison_rfc9110_8_8_3_2() {
    let (_d, s, etag) = site();
    let r = cond(&s, "/page.html", &[&format!("If-Match: W/{etag}")]);
    assert_eq!(r.status, 412);
}

#[test]
fn if_unmodified_since_in_the_past_is_412_rfc9110_13_1_4() {
    let (_d, s, _etag) = site();
    let r = cond(
        &s,
        "/page.html",
        &["If-Unmodified-Since: Sun, 06 Nov 1994 08:49:37 GMT"],
    );
    assert_eq!(r.status, 412, "{r:?}");
    let r = cond(&s, "/page.html", &[&format!("If-Unmodified-Since: {LM}")]);
    assert_eq!(r.status, 200);
}

#[test]
fn if_match_takes_precedence_over_if_unmodified_since_rfc9110_13_2_2() {
    let (_d, s, etag) = site();
    let r = cond(
        &s,
        "/page.html",
        &[
            &format!("If-Match: {etag}"),
            &format!("If-Unmodified-Since: {BEFORE}"),
        ],
    );
    assert_eq!(r.status, 200);
}

#[test]
fn a_failed_if_match_wins_over_a_matching_if_none_match_rfc9110_13_2_2() {
    let (_d, s, etag) = site();
    let r = cond(
        &s,
        "/page.html",
        &["If-Match: \"stale\"", &format!("If-None-Match: {etag}")],
    );
    assert_eq!(r.status, 412);
}

#[test]
fn conditionals_apply_to_files_sent_with_sendfile_too_rfc9110_13() {
    let (_d, s, _etag) = site();
    let r = s.get("/big.bin");
    let etag = r.header("etag").expect("ETag").to_owned();
    let r = cond(&s, "/big.bin", &[&format!("If-None-Match: {etag}")]);
    assert_eq!(r.status, 304);
    let r = cond(&s, "/big.bin", &[&format!("If-Modified-Since: {LM}")]);
    assert_eq!(r.status, 304);
    let r = cond(&s, "/big.bin", &["If-Match: \"x\""]);
    assert_eq!(r.status, 412);
}

#[test]
fn a_304_keeps_the_connection_alive_rfc9112_9_3() {
    let (_d, s, etag) = site();
    let mut c = s.connect();
    for _ in 0..3 {
        let r = c.request(&request(
            "GET",
            "/page.html",
            &[&format!("If-None-Match: {etag}")],
        ));
        assert_eq!(r.status, 304);
        assert!(!r.has_token("connection", "close"));
    }
}

#[test]
fn a_304_carries_only_the_fields_that_update_a_cache_rfc9110_15_4_5() {
    let (_d, s, etag) = site();
    for path in ["/page.html", "/big.bin"] {
        let full = s.get(path);
        assert_eq!(full.status, 200);
        assert!(full.header("content-type").is_some(), "{full:?}");
        assert_eq!(full.header("accept-ranges"), Some("bytes"), "{full:?}");
        let tag = full.header("etag").expect("ETag").to_owned();
        for method in ["GET", "HEAD"] {
            let mut c = s.connect();
            c.send(&request(method, path, &[&format!("If-None-Match: {tag}")]));
            let r = c.read_head();
            assert_eq!(r.status, 304, "{method} {path}: {r:?}");
            // Representation metadata other than the validators is not
            // sent: it would overwrite what the cache holds for nothing.
            assert_eq!(r.header("content-type"), None, "{method} {path}: {r:?}");
            assert_eq!(r.header("accept-ranges"), None, "{method} {path}: {r:?}");
            assert_eq!(r.header("etag"), Some(tag.as_str()), "{r:?}");
            assert_eq!(r.header("last-modified"), Some(LM), "{r:?}");
            assert!(r.header("date").is_some(), "{r:?}");
            // Vary stays: a cache needs it to pick the stored response.
            assert_eq!(r.header("vary"), full.header("vary"), "{r:?}");
        }
    }
    let r = cond(&s, "/page.html", &[&format!("If-Modified-Since: {LM}")]);
    assert_eq!(r.status, 304);
    assert_eq!(r.header("content-type"), None, "{r:?}");
    assert_eq!(r.header("etag"), Some(etag.as_str()), "{r:?}");
}
