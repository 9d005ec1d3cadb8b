//! Range requests (RFC 9110 §14): 206 with Content-Range, suffix and open
//! ranges, multipart/byteranges (§14.6), 416 (§15.5.17), If-Range
//! (§13.1.5), and the "Apache Killer" overlapping ranges (CVE-2011-3192).

mod common;
use common::*;

const LEN: usize = 10_000;

fn site() -> (TempDir, Server, Vec<u8>) {
    let d = TempDir::new("ranges");
    let data = pattern(LEN, 11);
    d.write("www/data.txt", &data);
    let s = Server::serve_dir(&d.join("www"));
    (d, s, data)
}

fn ranged(s: &Server, spec: &str) -> Response {
    s.request(&request("GET", "/data.txt", &[&format!("Range: {spec}")]))
}

#[test]
fn a_single_range_is_206_with_content_range_and_exact_bytes_rfc9110_14_4() {
    let (_d, s, data) = site();
    let r = ranged(&s, "bytes=100-199");
    assert_eq!(r.status, 206, "{r:?}");
    assert_eq!(r.header("content-range"), Some("bytes 100-199/10000"));
    assert_eq!(r.content_length(), Some(100));
    assert_eq!(r.body, &data[100..200]);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
}

#[test]
fn a_last_position_past_the_end_is_clipped_rfc9110_14_1_2() {
    let (_d, s, data) = site();
    let r = ranged(&s, "bytes=9990-20000");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 9990-9999/10000"));
    assert_eq!(r.body, &data[9990..]);
}

#[test]
fn a_suffix_range_selects_the_last_bytes_rfc9110_14_1_1() {
    let (_d, s, data) = site();
    let r = ranged(&s, "bytes=-500");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 9500-9999/10000"));
    assert_eq!(r.body, &data[9500..]);
    // A suffix longer than the file is the whole file.
    let r = ranged(&s, "bytes=-20000");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 0-9999/10000"));
    assert_eq!(r.body, data);
}

#[test]
fn an_open_range_runs_to_the_end_rfc9110_14_1_1() {
    let (_d, s, data) = site();
    let r = ranged(&s, "bytes=9000-");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 9000-9999/10000"));
    assert_eq!(r.body, &data[9000..]);
}

/// One part of a multipart/byteranges body: its headers (names lowercased)
/// and its data.
type Part = (Vec<(String, String)>, Vec<u8>);

/// Splits a multipart/byteranges body into its parts.
fn parse_multipart(r: &Response) -> Vec<Part> {
    let ct = r.header("content-type").expect("Content-Type");
    assert!(ct.starts_with("multipart/byteranges"), "Content-Type {ct}");
    let boundary = ct
        .split(';')
        .filter_map(|p| p.trim().strip_prefix("boundary="))
        .next()
        .expect("a boundary parameter")
        .trim_matches('"');
    let delim = format!("\r\n--{boundary}");
    let mut body = b"\r\n".to_vec();
    // The first delimiter may come without the leading CRLF (RFC 2046 §5.1.1).
    if r.body.starts_with(b"--") {
        body.extend_from_slice(&r.body);
    } else {
        body = r.body.clone();
    }
    let mut parts = Vec::new();
    let mut rest = &body[..];
    let first = find(rest, delim.as_bytes()).expect("first delimiter");
    rest = &rest[first + delim.len()..];
    loop {
        if rest.starts_with(b"--") {
            break; // close delimiter
        }
        assert!(rest.starts_with(b"\r\n"), "delimiter line must end in CRLF");
        rest = &rest[2..];
        let head_end = find(rest, b"\r\n\r\n").expect("part head");
        let head = String::from_utf8_lossy(&rest[..head_end]).into_owned();
        let headers = head
            .split("\r\n")
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (n, v) = l.split_once(':').expect("part header");
                (n.trim().to_ascii_lowercase(), v.trim().to_owned())
            })
            .collect();
        rest = &rest[head_end + 4..];
        let next = find(rest, delim.as_bytes()).expect("next delimiter");
        parts.push((headers, rest[..next].to_vec()));
        rest = &rest[next + delim.len()..];
    }
    parts
}

fn part_header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
    h.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

#[test]
fn several_ranges_are_sent_as_multipart_byteranges_rfc9110_14_6() {
    let (_d, s, data) = site();
    let r = ranged(&s, "bytes=0-9, 500-599, -10");
    assert_eq!(r.status, 206, "{r:?}");
    assert_eq!(r.header("content-range"), None, "only the parts have one");
    assert_eq!(r.content_length(), Some(r.body.len() as u64));
    let parts = parse_multipart(&r);
    let want = [(0usize, 10usize), (500, 600), (9990, 10000)];
    assert_eq!(parts.len(), want.len());
    for ((h, body), (a, b)) in parts.iter().zip(want) {
        assert_eq!(
            part_header(h, "content-range"),
            Some(format!("bytes {a}-{}/10000", b - 1).as_str())
        );
        assert_eq!(
            part_header(h, "content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(body, &data[a..b]);
    }
}

#[test]
fn overlapping_ranges_are_coalesced_rfc9110_14_2() {
    let (_d, s, data) = site();
    let r = ranged(&s, "bytes=0-99,50-149");
    assert_eq!(r.status, 206);
    let body = if r
        .header("content-type")
        .is_some_and(|c| c.starts_with("multipart/"))
    {
        let parts = parse_multipart(&r);
        assert_eq!(parts.len(), 1);
        parts[0].1.clone()
    } else {
        assert_eq!(r.header("content-range"), Some("bytes 0-149/10000"));
        r.body.clone()
    };
    assert_eq!(body, &data[..150]);
}

#[test]
fn an_unsatisfiable_range_is_416_with_the_length_rfc9110_15_5_17() {
    let (_d, s, _data) = site();
    for spec in ["bytes=10000-", "bytes=20000-30000", "bytes=-0"] {
        let mut c = s.connect();
        let r = c.request(&request("GET", "/data.txt", &[&format!("Range: {spec}")]));
        assert_eq!(r.status, 416, "{spec}: {r:?}");
        assert_eq!(r.header("content-range"), Some("bytes */10000"), "{spec}");
        // Not a framing error: the connection carries on.
        assert_eq!(c.request(&get("/data.txt")).status, 200);
    }
}

#[test]
fn one_satisfiable_range_among_unsatisfiable_ones_is_served_rfc9110_14_1_1() {
    let (_d, s, data) = site();
    let r = ranged(&s, "bytes=20000-, 5-9");
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 5-9/10000"));
    assert_eq!(r.body, &data[5..10]);
}

#[test]
fn invalid_range_syntax_is_ignored_with_200_rfc9110_14_2() {
    let (_d, s, data) = site();
    for spec in [
        "bytes=abc",
        "bytes=5-2",
        "bytes=",
        "items=0-5",
        "bytes 0-5",
        "bytes=--5",
        "bytes=0-5-",
        "bytes=99999999999999999999999-",
    ] {
        let r = ranged(&s, spec);
        assert_eq!(r.status, 200, "{spec}: {r:?}");
        assert_eq!(r.body, data, "{spec}");
    }
}

#[test]
fn if_range_with_the_current_etag_gives_206_rfc9110_13_1_5() {
    let (_d, s, data) = site();
    let etag = s.get("/data.txt").header("etag").expect("ETag").to_owned();
    let r = s.request(&request(
        "GET",
        "/data.txt",
        &["Range: bytes=0-9", &format!("If-Range: {etag}")],
    ));
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &data[..10]);
}

#[test]
fn if_range_with_a_stale_etag_gives_the_whole_file_rfc9110_13_1_5() {
    let (_d, s, data) = site();
    let r = s.request(&request(
        "GET",
        "/data.txt",
        &["Range: bytes=0-9", "If-Range: \"stale-etag\""],
    ));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, data);
}

#[test]
fn if_range_with_a_weak_etag_never_matches_rfc9110_13_1_5() {
    let (_d, s, data) = site();
    let etag = s.get("/data.txt").header("etag").expect("ETag").to_owned();
    let r = s.request(&request(
        "GET",
        "/data.txt",
        &["Range: bytes=0-9", &format!("If-Range: W/{etag}")],
    ));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, data);
}

#[test]
fn if_range_with_the_last_modified_date_gives_206_rfc9110_13_1_5() {
    let (_d, s, data) = site();
    let lm = s
        .get("/data.txt")
        .header("last-modified")
        .expect("Last-Modified")
        .to_owned();
    let r = s.request(&request(
        "GET",
        "/data.txt",
        &["Range: bytes=10-19", &format!("If-Range: {lm}")],
    ));
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &data[10..20]);
    let r = s.request(&request(
        "GET",
        "/data.txt",
        &[
            "Range: bytes=10-19",
            "If-Range: Sun, 06 Nov 1994 08:49:37 GMT",
        ],
    ));
    assert_eq!(r.status, 200);
}

#[test]
fn range_is_ignored_for_head_rfc9110_14_2() {
    let (_d, s, _data) = site();
    let mut c = s.connect();
    c.send(&request("HEAD", "/data.txt", &["Range: bytes=0-9"]));
    let r = c.read_head();
    assert_eq!(r.status, 200);
    assert_eq!(r.content_length(), Some(LEN as u64));
}

#[test]
fn many_overlapping_ranges_cost_no_more_than_the_file_cve_2011_3192() {
    let (_d, s, data) = site();
    // The Apache Killer header: "bytes=0-,5-0,5-1,5-2,..." (here 99 specs,
    // under the 100-spec cap, so the ranges are honoured and must merge).
    let mut spec = String::from("bytes=0-");
    for i in 1..99 {
        spec.push_str(&format!(",5-{i}"));
    }
    let r = ranged(&s, &spec);
    assert!(r.status == 206 || r.status == 200, "{r:?}");
    assert!(
        r.body.len() <= 2 * LEN + 1024,
        "{} bytes sent for a {LEN}-byte file",
        r.body.len()
    );
    assert!(contains(&r.body, &data));
}

#[test]
fn more_than_a_hundred_ranges_are_ignored_cve_2011_3192() {
    let (_d, s, data) = site();
    let mut spec = String::from("bytes=");
    for i in 0..1300 {
        if i > 0 {
            spec.push(',');
        }
        spec.push_str(&format!("{}-{}", i * 7, i * 7));
    }
    let r = ranged(&s, &spec);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, data);
}

#[test]
fn repeated_identical_ranges_are_sent_once_cve_2011_3192() {
    let (_d, s, data) = site();
    let spec = format!("bytes={}", vec!["0-9999"; 50].join(","));
    let r = ranged(&s, &spec);
    assert!(r.status == 206 || r.status == 200, "{r:?}");
    assert!(r.body.len() <= LEN + 1024, "{} bytes", r.body.len());
    assert!(contains(&r.body, &data));
}
