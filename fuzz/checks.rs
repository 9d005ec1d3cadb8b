//! The properties the fuzz targets check, shared by the libFuzzer targets
//! (`fuzz_targets/*.rs`, through `#[path = "../checks.rs"] mod checks;`) and
//! by the corpus replay test of stoa-server
//! (`crates/stoa-server/tests/fuzz_corpus.rs`), so that a corpus file means
//! the same thing in both places.
//!
//! Every function takes the raw fuzzer input and panics (with a message
//! saying which property broke) when the code under test misbehaves. Inputs
//! the code may legitimately refuse are not failures; only panics inside the
//! library and broken invariants are.
//!
//! Input layouts (see fuzz/README.md):
//! - `request_head`, `response_head`: 2 bytes (u16 little-endian) choose the
//!   split point, the rest is the wire bytes;
//! - `chunked_body`: 1 byte `k`, then `k % 8` piece sizes (1 byte each,
//!   size = byte + 1), the rest is the wire bytes;
//! - `range`: 8 bytes (u64 little-endian, zero-padded) are the
//!   representation length, the rest is the Range header value;
//! - `path_normalize`: the whole input is the raw path;
//! - `fastcgi_records`: 2 bytes choose the split point, the rest is a
//!   stream of FastCGI records;
//! - `cgi_head`: 2 bytes choose the split point, the rest is a script's
//!   output (head and body);
//! - `h2_conn`: 1 byte of options, 2 bytes choose the split point, the
//!   rest is what an HTTP/2 client sends (`stoa_h2::fuzzing`);
//! - `hpack`: 1 byte picks the table and list limits, 1 byte where the
//!   rest splits into two header blocks of one connection;
//! - `qpack`: 1 byte picks the table capacity, blocked streams and
//!   section limit, 1 byte where the rest splits into encoder-stream
//!   input and a field section (`stoa_h3::qpack::fuzzing`).

#![allow(dead_code)]

use std::ops::Range;

use stoa_h1::body::{push_chunk_header, BodyDecoder, BodyError, CHUNK_END, LAST_CHUNK};
use stoa_h1::request::MAX_HEADERS;
use stoa_h1::{Framing, ParseError, RequestHead, RequestLimits, ResponseHead, Version};
use stoa_server::http::{path, range};

/// Every target name, in the order of fuzz/Cargo.toml.
pub const TARGETS: &[&str] = &[
    "request_head",
    "chunked_body",
    "range",
    "path_normalize",
    "response_head",
    "fastcgi_records",
    "cgi_head",
    "h2_conn",
    "hpack",
    "qpack",
];

/// Runs the check of `target` on one input.
pub fn run(target: &str, data: &[u8]) {
    match target {
        "request_head" => request_head(data),
        "chunked_body" => chunked_body(data),
        "range" => range(data),
        "path_normalize" => path_normalize(data),
        "response_head" => response_head(data),
        // The record and name-value decoders of stoa-fastcgi: its own check
        // (same 2-byte split layout) compares whole, split and byte-by-byte
        // decoding and bounds what is buffered.
        "fastcgi_records" => stoa_fastcgi::fuzzing::fuzz_check(data),
        "cgi_head" => cgi_head(data),
        // The HTTP/2 server connection of stoa-h2: its own check (events
        // the same however the input is split, bounded output, ...).
        "h2_conn" => stoa_h2::fuzzing::fuzz_check(data),
        // The HPACK decoder of stoa-h2, against a plain reference decoder
        // in the same crate (`stoa_h2::hpack::fuzzing`).
        "hpack" => stoa_h2::hpack::fuzzing::fuzz_check(data),
        // The QPACK decoder of stoa-h3: split encoder-stream input, table
        // bounds, re-encoding (`stoa_h3::qpack::fuzzing`).
        "qpack" => stoa_h3::qpack::fuzzing::fuzz_check(data),
        other => panic!("unknown fuzz target {other:?}"),
    }
}

/// Splits `data` into a split point (from its first two bytes, reduced
/// modulo the length of the rest) and the rest.
fn split_point(data: &[u8]) -> (usize, &[u8]) {
    let (sel, wire) = match data {
        [a, b, rest @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), rest),
        _ => (0, &[][..]),
    };
    (sel % (wire.len() + 1), wire)
}

/// Whether the known, not yet fixed finding `issue` is to be tolerated:
/// names listed in the environment variable `STOA_FUZZ_ALLOW`
/// (comma-separated), so that fuzzing can go on looking for other bugs
/// meanwhile. The corpus replay test never sets it; its reproducer in
/// fuzz/regressions keeps failing there until the code is fixed.
fn allowed(issue: &str) -> bool {
    static ALLOW: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    ALLOW
        .get_or_init(|| {
            std::env::var("STOA_FUZZ_ALLOW")
                .unwrap_or_default()
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .iter()
        .any(|a| a == issue)
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// ---------------------------------------------------------------------------
// request_head

/// Small limits, so that inputs of a few hundred bytes reach the 414/431
/// paths too (the default limits need 8-16 KiB inputs).
const SMALL_LIMITS: RequestLimits = RequestLimits {
    max_head_bytes: 512,
    max_uri_bytes: 128,
};

/// `RequestHead::parse` never panics; a complete head is self-consistent;
/// a head fed in two pieces gives the same answer as the whole; a reused
/// `RequestHead` gives the same answer as a fresh one.
pub fn request_head(data: &[u8]) {
    let (split, wire) = split_point(data);
    request_head_with(wire, split, &RequestLimits::default());
    request_head_with(wire, split, &SMALL_LIMITS);
}

/// What a parsed head says, in a comparable form.
#[derive(Debug, PartialEq, Eq)]
struct RequestView {
    method: String,
    target: Vec<u8>,
    version: Version,
    framing: Framing,
    keep_alive: bool,
    expect_continue: bool,
    host: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    request_line: Vec<u8>,
}

fn request_view(h: &RequestHead) -> RequestView {
    RequestView {
        method: h.method.as_str().to_owned(),
        target: h.target().to_vec(),
        version: h.version,
        framing: h.framing,
        keep_alive: h.keep_alive,
        expect_continue: h.expect_continue,
        host: h.host().map(<[u8]>::to_vec),
        headers: h.headers().map(|(n, v)| (n.to_vec(), v.to_vec())).collect(),
        request_line: h.request_line().to_vec(),
    }
}

fn request_head_with(wire: &[u8], split: usize, limits: &RequestLimits) {
    let mut full = RequestHead::default();
    let full_r = full.parse(wire, limits);
    let mut full_view = None;
    if let Ok(Some(n)) = full_r {
        assert!(
            n > 0 && n <= wire.len(),
            "request head length {n} outside 1..={}",
            wire.len()
        );
        check_request_accessors(&full, &wire[..n], limits);
        // The head alone, without whatever follows it, parses the same.
        let mut alone = RequestHead::default();
        let alone_r = alone.parse(&wire[..n], limits);
        assert_eq!(alone_r, Ok(Some(n)), "the head alone parses differently");
        let view = request_view(&full);
        assert_eq!(
            request_view(&alone),
            view,
            "the head alone parses differently"
        );
        full_view = Some(view);
    }

    // The first `split` bytes, as a connection would see them before the
    // rest arrives.
    let prefix = &wire[..split];
    let mut reused = RequestHead::default();
    let prefix_r = reused.parse(prefix, limits);
    match (prefix_r, full_r) {
        (Ok(Some(m)), _) => {
            assert!(m <= prefix.len(), "prefix head length {m} > {}", prefix.len());
            assert_eq!(
                full_r,
                Ok(Some(m)),
                "the head was complete in the first {split} bytes but the whole input parses differently"
            );
            assert_eq!(
                Some(request_view(&reused)),
                full_view,
                "a head complete in the first {split} bytes parses differently from the whole"
            );
        }
        (Ok(None), Ok(Some(n))) => assert!(
            n > split,
            "the first {split} bytes hold a complete head of {n} bytes, but parse says more is needed"
        ),
        (Ok(None), _) => {}
        (Err(ParseError::UriTooLong), Ok(Some(_))) if allowed("partial-414") => {}
        (Err(e), Ok(Some(n))) => panic!(
            "the first {split} bytes are refused with {e:?} (status {}), but the whole input is a valid head of {n} bytes: \
             a request's fate depends on how TCP segments it",
            e.status()
        ),
        // The limits of an incomplete head are checked only as far as the
        // bytes so far tell (a target longer than the URI limit is caught
        // early only while its line is unfinished), so the whole input may
        // be "incomplete" where a prefix was already refused; the complete
        // head is refused all the same (see the arm above).
        (Err(_), Ok(None)) | (Err(_), Err(_)) => {}
    }

    // A head object reused for the next request forgets the previous one.
    let again = reused.parse(wire, limits);
    assert_eq!(
        again, full_r,
        "a reused RequestHead parses differently from a fresh one"
    );
    if let Ok(Some(_)) = again {
        assert_eq!(
            Some(request_view(&reused)),
            full_view,
            "a reused RequestHead parses differently from a fresh one"
        );
    }
}

fn check_request_accessors(h: &RequestHead, head: &[u8], limits: &RequestLimits) {
    assert!(
        head.len() <= limits.max_head_bytes + 64,
        "accepted a head of {} bytes over the limit of {}",
        head.len(),
        limits.max_head_bytes
    );
    assert!(head.ends_with(b"\n"), "a head must end with its blank line");

    let target = h.target();
    assert!(!target.is_empty(), "empty request-target accepted");
    assert!(
        target.len() <= limits.max_uri_bytes,
        "request-target of {} bytes over the limit of {}",
        target.len(),
        limits.max_uri_bytes
    );
    // path(), query() and host() take the absolute form (RFC 9112 §3.2.2)
    // into account: "http://authority/path?query".
    let path = h.path();
    assert!(!path.contains(&b'?'), "path() contains '?'");
    let before_query = match h.query() {
        Some(q) => {
            let i = target
                .iter()
                .position(|&b| b == b'?')
                .expect("a query needs a '?'");
            assert_eq!(
                &target[i + 1..],
                q,
                "query() is not what follows the first '?'"
            );
            &target[..i]
        }
        None => {
            assert!(
                !target.contains(&b'?'),
                "a '?' in the target but no query()"
            );
            target
        }
    };
    let scheme = [&b"http://"[..], b"https://"]
        .into_iter()
        .find(|s| target.len() >= s.len() && target[..s.len()].eq_ignore_ascii_case(s));
    match scheme {
        Some(s) => {
            let host = h.host().expect("an absolute-form target has an authority");
            assert!(!host.is_empty(), "empty authority accepted");
            assert!(!host.contains(&b'@'), "userinfo in the authority accepted");
            assert!(
                !host.contains(&b'/') && !host.contains(&b'?'),
                "host() {:?} runs into the path",
                lossy(host)
            );
            let rest = &before_query[s.len()..];
            assert!(
                rest.starts_with(host),
                "host() is not the target's authority"
            );
            let want = &rest[host.len()..];
            let want: &[u8] = if want.is_empty() { b"/" } else { want };
            assert_eq!(
                lossy(path),
                lossy(want),
                "path() of an absolute-form target is not what follows the authority"
            );
        }
        None => {
            assert_eq!(path, before_query, "path() is not the target before '?'");
            assert_eq!(
                h.host(),
                h.header("host"),
                "host() disagrees with header(\"host\")"
            );
        }
    }

    let line = h.request_line();
    assert!(
        !line.contains(&b'\r') && !line.contains(&b'\n'),
        "request_line() contains a line break"
    );
    assert!(
        line.starts_with(h.method.as_str().as_bytes()),
        "request_line() {:?} does not start with the method {:?}",
        lossy(line),
        h.method.as_str()
    );
    assert!(
        line.windows(target.len()).any(|w| w == target),
        "request_line() does not contain the target"
    );

    let mut count = 0;
    let mut hosts = 0;
    for (name, value) in h.headers() {
        count += 1;
        assert!(!name.is_empty(), "empty header name");
        let name_str = std::str::from_utf8(name).expect("httparse names are tokens");
        assert!(
            h.header(name_str).is_some(),
            "header({name_str:?}) not found"
        );
        assert!(
            !matches!(value.first(), Some(b' ' | b'\t'))
                && !matches!(value.last(), Some(b' ' | b'\t')),
            "header value {:?} keeps surrounding whitespace",
            lossy(value)
        );
        if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
        }
    }
    assert!(count <= MAX_HEADERS, "{count} headers accepted");
    assert!(hosts <= 1, "{hosts} Host headers accepted");
    if h.version == Version::Http11 {
        assert_eq!(
            hosts, 1,
            "HTTP/1.1 request without exactly one Host accepted"
        );
    }

    match h.framing {
        Framing::None => assert!(!h.has_body()),
        Framing::Length(n) => {
            assert!(n > 0, "Content-Length: 0 should be Framing::None");
            assert!(h.has_body());
            assert!(
                h.header("transfer-encoding").is_none(),
                "Content-Length framing with a Transfer-Encoding header"
            );
        }
        Framing::Chunked => {
            assert!(h.has_body());
            assert_eq!(h.version, Version::Http11, "chunked accepted in HTTP/1.0");
            assert!(
                h.header("content-length").is_none(),
                "chunked framing with a Content-Length header"
            );
        }
        Framing::Close => panic!("a request cannot be close-delimited"),
    }
    if h.expect_continue {
        assert_eq!(
            h.version,
            Version::Http11,
            "100-continue noted for HTTP/1.0"
        );
    }
}

// ---------------------------------------------------------------------------
// chunked_body

/// What feeding a whole input to a decoder produced.
#[derive(Debug, PartialEq, Eq)]
struct Decoded {
    body: Vec<u8>,
    consumed: usize,
    done: bool,
    error: Option<BodyError>,
}

/// Feeds `wire` to a chunked decoder in pieces whose sizes cycle through
/// `sizes` (all of it at once when `sizes` is empty), keeping unconsumed
/// bytes in a buffer as a connection does, and checks every `decode` call.
fn decode_in_pieces(wire: &[u8], sizes: &[usize]) -> Decoded {
    let mut d = BodyDecoder::new(Framing::Chunked);
    let mut buf: Vec<u8> = Vec::new();
    let mut body = Vec::new();
    let mut consumed = 0usize;
    let mut fed = 0usize;
    let mut piece = 0usize;
    let mut error = None;
    'feed: while fed < wire.len() && !d.is_done() {
        let step = if sizes.is_empty() {
            wire.len()
        } else {
            sizes[piece % sizes.len()]
        };
        piece += 1;
        let end = (fed + step).min(wire.len());
        buf.extend_from_slice(&wire[fed..end]);
        fed = end;
        while !d.is_done() {
            match d.decode(&buf) {
                Ok((n, data)) => {
                    assert!(n <= buf.len(), "decode consumed {n} of {} bytes", buf.len());
                    assert!(
                        data.len() <= n,
                        "decode returned more data than it consumed"
                    );
                    let start = data.as_ptr() as usize;
                    let base = buf.as_ptr() as usize;
                    assert!(
                        data.is_empty() || (start >= base && start + data.len() <= base + n),
                        "decoded data is not inside the consumed bytes"
                    );
                    if n == 0 {
                        assert!(
                            buf.is_empty() || d.is_done(),
                            "decoder stalled: consumed nothing of {} bytes and is not done",
                            buf.len()
                        );
                        break;
                    }
                    body.extend_from_slice(data);
                    buf.drain(..n);
                    consumed += n;
                }
                Err(e) => {
                    error = Some(e);
                    break 'feed;
                }
            }
        }
    }
    assert!(
        consumed <= wire.len(),
        "consumed {consumed} of {} bytes",
        wire.len()
    );
    assert_eq!(consumed + buf.len(), fed);
    let done = d.is_done();
    if done {
        assert!(error.is_none());
        // A finished decoder consumes nothing more.
        let rest = &wire[consumed..];
        let (n, data) = d.decode(rest).expect("a finished decoder does not fail");
        assert_eq!(
            (n, data.len()),
            (0, 0),
            "a finished decoder consumed more input"
        );
        assert!(d.is_done());
        assert!(d.eof(), "eof() after the last chunk must say complete");
    }
    Decoded {
        body,
        // Where an error stops the decoder depends on how the input was cut
        // (a failing call reports no progress), so only the error counts.
        consumed: if error.is_some() { 0 } else { consumed },
        done,
        error,
    }
}

/// The chunked decoder gives the same body, the same consumed count and the
/// same error whatever the piece sizes; and what the chunked encoder writes
/// decodes back to the original bytes.
pub fn chunked_body(data: &[u8]) {
    let (sizes, wire): (Vec<usize>, &[u8]) = match data.split_first() {
        Some((&k, rest)) => {
            let k = usize::from(k % 8).min(rest.len());
            (
                rest[..k].iter().map(|&b| usize::from(b) + 1).collect(),
                &rest[k..],
            )
        }
        None => (Vec::new(), data),
    };
    let whole = decode_in_pieces(wire, &[]);
    let bytewise = decode_in_pieces(wire, &[1]);
    assert_eq!(
        bytewise, whole,
        "byte-by-byte decoding differs from one-shot decoding"
    );
    if !sizes.is_empty() {
        let pieced = decode_in_pieces(wire, &sizes);
        assert_eq!(
            pieced, whole,
            "decoding in pieces of {sizes:?} differs from one-shot decoding"
        );
    }
    if whole.done {
        assert!(whole.consumed <= wire.len());
    }

    // Encoder round trip: the input as a body, chunked at the chosen sizes.
    let mut encoded = Vec::with_capacity(wire.len() + 64);
    let mut rest = wire;
    let mut i = 0;
    while !rest.is_empty() {
        let step = if sizes.is_empty() {
            rest.len()
        } else {
            sizes[i % sizes.len()]
        };
        i += 1;
        let (chunk, tail) = rest.split_at(step.min(rest.len()));
        push_chunk_header(&mut encoded, chunk.len());
        encoded.extend_from_slice(chunk);
        encoded.extend_from_slice(CHUNK_END);
        rest = tail;
    }
    encoded.extend_from_slice(LAST_CHUNK);
    let encoded_len = encoded.len();
    encoded.extend_from_slice(b"GET / HTTP/1.1\r\n"); // the next request
    let round = decode_in_pieces(&encoded, &sizes);
    assert_eq!(
        round,
        Decoded {
            body: wire.to_vec(),
            consumed: encoded_len,
            done: true,
            error: None,
        },
        "the chunked encoding of the input does not decode back to it"
    );
}

// ---------------------------------------------------------------------------
// range

/// Every satisfiable range is non-empty, inside the representation, and no
/// two of them overlap or touch (so their total is at most the length);
/// the multipart plan's Content-Length is the length of what it describes.
pub fn range(data: &[u8]) {
    let mut len_bytes = [0u8; 8];
    let n = data.len().min(8);
    len_bytes[..n].copy_from_slice(&data[..n]);
    let len = u64::from_le_bytes(len_bytes);
    let value = &data[n..];

    let ranges = match range::parse(value, len) {
        range::Ranges::Ignore | range::Ranges::Unsatisfiable => return,
        range::Ranges::Satisfiable(r) => r,
    };
    assert!(!ranges.is_empty(), "Satisfiable with no ranges");
    assert!(ranges.len() <= range::MAX_RANGES, "{} ranges", ranges.len());
    let mut total: u128 = 0;
    for r in &ranges {
        assert!(r.start < r.end, "empty range {r:?}");
        assert!(r.end <= len, "range {r:?} beyond the length {len}");
        total += u128::from(r.end - r.start);
    }
    for (i, a) in ranges.iter().enumerate() {
        for b in &ranges[i + 1..] {
            assert!(
                !(a.start <= b.end && b.start <= a.end),
                "ranges {a:?} and {b:?} overlap or touch: they should have been merged"
            );
        }
    }
    assert!(
        total <= u128::from(len),
        "ranges select {total} bytes of {len}"
    );

    if ranges.len() == 1 {
        let cr = range::content_range(&ranges[0], len);
        assert_eq!(
            cr,
            format!("bytes {}-{}/{len}", ranges[0].start, ranges[0].end - 1)
        );
        return;
    }
    for (ct, boundary) in [("text/plain; charset=utf-8", "3d6b6a416f9b5"), ("", "b")] {
        check_multipart(&ranges, len, ct, boundary);
    }
}

fn check_multipart(ranges: &[Range<u64>], len: u64, ct: &str, boundary: &str) {
    let plan = range::multipart(ranges, len, ct, boundary);
    assert_eq!(plan.parts.len(), ranges.len());
    let mut expected: u128 = 0;
    for ((head, r), want) in plan.parts.iter().zip(ranges) {
        assert_eq!(r, want, "parts are not in the order of the ranges");
        let head = std::str::from_utf8(head).expect("part heads are ASCII");
        assert!(
            head.starts_with(&format!("\r\n--{boundary}\r\n")),
            "{head:?}"
        );
        assert!(head.ends_with("\r\n\r\n"), "{head:?}");
        let cr = format!("Content-Range: {}\r\n", range::content_range(r, len));
        assert!(head.contains(&cr), "{head:?} lacks {cr:?}");
        assert_eq!(head.contains("Content-Type: "), !ct.is_empty(), "{head:?}");
        expected += head.len() as u128 + u128::from(r.end - r.start);
    }
    assert_eq!(plan.trailer, format!("\r\n--{boundary}--\r\n").into_bytes());
    expected += plan.trailer.len() as u128;
    // Only a representation within a few hundred bytes of 2^64 can
    // overflow; multipart() saturates then (no file is that large).
    let want = u64::try_from(expected).unwrap_or(u64::MAX);
    assert_eq!(
        plan.content_length, want,
        "multipart Content-Length {} but the parts add up to {expected}",
        plan.content_length
    );
}

// ---------------------------------------------------------------------------
// path_normalize

/// A normalized path is absolute, has no dot segments, no empty segments,
/// no NUL, backslash or control character, is never longer than the raw
/// path, is a fixed point of `normalize`, and survives `encode`.
pub fn path_normalize(raw: &[u8]) {
    let Ok(p) = path::normalize(raw) else {
        return;
    };
    assert!(p.starts_with('/'), "{p:?} is not absolute");
    assert!(!p.contains("//"), "{p:?} contains //");
    assert!(
        !p.contains("/../") && !p.contains("/./"),
        "{p:?} has a dot segment"
    );
    assert!(
        !p.ends_with("/..") && !p.ends_with("/."),
        "{p:?} ends with a dot segment"
    );
    assert!(
        !p.split('/').any(|s| s == "." || s == ".."),
        "{p:?} has a dot segment"
    );
    assert!(!p.contains('\0'), "{p:?} contains NUL");
    assert!(!p.contains('\\'), "{p:?} contains a backslash");
    assert!(
        !p.bytes().any(|b| b < 0x20 || b == 0x7f),
        "{p:?} contains a control character"
    );
    assert!(
        p.len() <= raw.len(),
        "{p:?} is longer than the raw path {:?}",
        lossy(raw)
    );
    // The result is decoded: a '%' in it came from "%25" and is not an
    // escape any more, so only paths without one are fixed points.
    if !p.contains('%') {
        assert_eq!(
            path::normalize(p.as_bytes()),
            Ok(p.clone()),
            "normalize is not idempotent"
        );
    }
    let enc = path::encode(&p);
    assert!(
        enc.bytes()
            .all(|b| b.is_ascii_alphanumeric()
                || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/' | b'%')),
        "encode({p:?}) = {enc:?} keeps a reserved character"
    );
    assert_eq!(
        path::normalize(enc.as_bytes()),
        Ok(p.clone()),
        "encode({p:?}) = {enc:?} does not decode back"
    );
}

// ---------------------------------------------------------------------------
// response_head

/// A compact view of a parsed response head.
#[derive(Debug, PartialEq, Eq)]
struct ResponseView {
    status: u16,
    version: Option<Version>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
}

fn response_view(h: &ResponseHead) -> ResponseView {
    ResponseView {
        status: h.status,
        version: h.version,
        headers: h.headers().map(|(n, v)| (n.to_vec(), v.to_vec())).collect(),
    }
}

/// `ResponseHead::parse`, `framing` and `keep_alive` never panic; the head
/// in two pieces parses like the whole; the framing follows RFC 9112 §6.3.
pub fn response_head(data: &[u8]) {
    let (split, wire) = split_point(data);
    for max in [16384, 256] {
        response_head_with(wire, split, max);
    }
}

fn response_head_with(wire: &[u8], split: usize, max: usize) {
    let mut full = ResponseHead::default();
    let full_r = full.parse(wire, max);
    let mut full_view = None;
    if let Ok(Some(n)) = full_r {
        assert!(
            n > 0 && n <= wire.len(),
            "response head length {n} outside 1..={}",
            wire.len()
        );
        assert!(
            n <= max,
            "accepted a head of {n} bytes over the limit of {max}"
        );
        check_response_accessors(&full);
        full_view = Some(response_view(&full));
    }

    let prefix = &wire[..split];
    let mut reused = ResponseHead::default();
    let prefix_r = reused.parse(prefix, max);
    match (prefix_r, full_r) {
        (Ok(Some(m)), _) => {
            assert!(m <= prefix.len());
            assert_eq!(full_r, Ok(Some(m)), "a head complete in the first {split} bytes parses differently from the whole");
            assert_eq!(Some(response_view(&reused)), full_view);
        }
        (Ok(None), Ok(Some(n))) => assert!(
            n > split,
            "the first {split} bytes hold a complete head of {n} bytes, but parse says more is needed"
        ),
        (Ok(None), _) => {}
        (Err(e), Ok(Some(n))) => panic!(
            "the first {split} bytes are refused with {e:?}, but the whole input is a valid head of {n} bytes"
        ),
        (Err(_), Ok(None)) => {
            panic!("the first {split} bytes are refused but the whole input is only incomplete")
        }
        (Err(_), Err(_)) => {}
    }
    let again = reused.parse(wire, max);
    assert_eq!(
        again, full_r,
        "a reused ResponseHead parses differently from a fresh one"
    );
    if let Ok(Some(_)) = again {
        assert_eq!(Some(response_view(&reused)), full_view);
    }
}

fn check_response_accessors(h: &ResponseHead) {
    assert!(h.status <= 999, "status {}", h.status);
    for (name, _value) in h.headers() {
        assert!(!name.is_empty(), "empty header name");
        let name = std::str::from_utf8(name).expect("httparse names are tokens");
        assert!(h.header(name).is_some(), "header({name:?}) not found");
    }
    let ka = h.keep_alive();
    if h.version != Some(Version::Http11) && h.header("connection").is_none() {
        assert!(!ka, "HTTP/1.0 response without Connection kept alive");
    }
    assert_eq!(
        h.framing(true),
        Ok(Framing::None),
        "a response to HEAD has no body"
    );
    let bodyless = (100..200).contains(&h.status) || h.status == 204 || h.status == 304;
    match h.framing(false) {
        Ok(Framing::None) => {}
        Ok(f) if bodyless => panic!("status {} has framing {f:?}", h.status),
        Ok(Framing::Length(n)) => assert!(n > 0, "Content-Length: 0 should be Framing::None"),
        Ok(Framing::Chunked) => {
            assert!(
                h.header("transfer-encoding").is_some(),
                "chunked without Transfer-Encoding"
            )
        }
        Ok(Framing::Close) => {}
        Err(_) => assert!(
            h.header("content-length").is_some(),
            "a framing error without a Content-Length"
        ),
    }
}

/// A CGI script's response head (`stoa_cgi::parse_head`, RFC 3875 §6): no
/// panic; a complete head lies within the input and the limit; the verdict
/// does not depend on where the pipe split the output; the classification
/// and status are consistent.
pub fn cgi_head(data: &[u8]) {
    let (split, out) = split_point(data);
    for max in [65536, 64] {
        let full = stoa_cgi::parse_head(out, max);
        if let Ok(Some((h, n))) = &full {
            assert!(
                *n > 0 && *n <= out.len(),
                "head length {n} outside 1..={}",
                out.len()
            );
            let status = h.effective_status();
            assert!(
                (100..=599).contains(&status),
                "status {status} out of range"
            );
            match h.kind() {
                stoa_cgi::Kind::LocalRedirect(loc) => {
                    assert!(
                        loc.starts_with(b"/") && !loc.starts_with(b"//"),
                        "local redirect to {loc:?}"
                    );
                    assert!(h.status.is_none() && h.headers.is_empty() && h.content_type.is_none());
                }
                stoa_cgi::Kind::ClientRedirect => assert!(h.location.is_some()),
                stoa_cgi::Kind::Document => assert!(h.location.is_none()),
            }
            for (name, value) in &h.headers {
                assert!(
                    !name.is_empty() && !name.contains([':', '\r', '\n', ' ']),
                    "bad name {name:?}"
                );
                assert!(
                    !value.contains(&b'\n') && !value.contains(&b'\r'),
                    "CR/LF in a value: header injection"
                );
            }
        }
        let prefix = stoa_cgi::parse_head(&out[..split], max);
        match (&prefix, &full) {
            (Ok(Some((_, m))), _) => {
                let same = matches!(&full, Ok(Some((_, n))) if n == m);
                assert!(
                    same,
                    "a head complete in the first {split} bytes parses differently from the whole"
                );
            }
            (Ok(None), Ok(Some((_, n)))) => assert!(
                *n > split,
                "complete head of {n} bytes within {split} not seen"
            ),
            (Err(e), Ok(Some(_))) => {
                panic!("the first {split} bytes are refused ({e:?}) but the whole is valid")
            }
            _ => {}
        }
    }
}
