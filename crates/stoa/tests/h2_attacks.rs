//! The known HTTP/2 denial-of-service attacks, each from a raw client that
//! writes frames by hand over cleartext with prior knowledge (h2c, RFC
//! 9113 §3.3): what an attacker sends is exactly what the test sends, not
//! what a well-behaved client library would let through. For each: the
//! server answers as RFC 9113 and the advisories expect (a stream error,
//! or GOAWAY and a close), its memory stays bounded (VmRSS of the server
//! process), and another client is served at once afterwards.
//!
//! - CONTINUATION flood: CVE-2024-27316 (Apache httpd: header bytes kept
//!   without bound), CVE-2023-45288 (Go: CPU spent decoding them).
//! - HPACK bomb: CVE-2016-6581 (a small header block that decodes into a
//!   huge header list through references to the dynamic table).
//! - SETTINGS flood (CVE-2019-9515) and PING flood (CVE-2019-9512): frames
//!   the server must acknowledge, sent without reading the acknowledgements.
//! - Empty frames flood (CVE-2019-9518): DATA frames without data and
//!   without END_STREAM.
//!
//! The h2 crate answers most of them itself; the PING/SETTINGS budget is
//! Stoa's (`[http2] max_control_frames`, crates/stoa-server/src/proto/flood.rs).
//!
//! Rapid Reset (CVE-2023-44487) is in h2.rs.

mod common;

use common::*;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Frame types (RFC 9113 §6) and flags.
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

/// GOAWAY / RST_STREAM error codes (RFC 9113 §7).
const ENHANCE_YOUR_CALM: u32 = 0xb;

/// One frame, as it goes on the wire.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    assert!(len < 1 << 24);
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The start of a request's header block (HPACK, RFC 7541 Appendix A
/// static table): `:method` (GET or POST), `:scheme http`, `:path` as a
/// literal, `:authority t`.
fn request_block(method_post: bool, path: &str) -> Vec<u8> {
    let mut b = vec![if method_post { 0x83 } else { 0x82 }, 0x86];
    // :path (static index 4), literal without indexing.
    b.push(0x04);
    b.push(path.len() as u8);
    b.extend_from_slice(path.as_bytes());
    // :authority (static index 1).
    b.extend_from_slice(&[0x01, 0x01, b't']);
    b
}

/// A frame read from the server.
#[derive(Debug)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl Frame {
    /// The error code of a GOAWAY or RST_STREAM.
    fn error_code(&self) -> u32 {
        let at = if self.kind == GOAWAY { 4 } else { 0 };
        let b = &self.payload[at..at + 4];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
}

fn read_frame(s: &mut TcpStream) -> io::Result<Frame> {
    let mut h = [0u8; 9];
    s.read_exact(&mut h)?;
    let len = (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload)?;
    Ok(Frame {
        kind: h[3],
        flags: h[4],
        stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
        payload,
    })
}

/// How the server ended the exchange the test watched.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// GOAWAY with this error code (and then, within the time, a close).
    GoAway(u32),
    /// RST_STREAM on the watched stream, with this code.
    Reset(u32),
    /// A response head on the watched stream, with this `:status`.
    Status(u16),
    /// The connection closed (or was reset) without a GOAWAY first.
    Closed,
}

/// Reads frames until the server ends things for `stream` (a response
/// head, a reset) or for the connection (GOAWAY, a close), within `limit`.
/// Other frames (SETTINGS, their ACKs, PING ACKs, WINDOW_UPDATE) are
/// skipped. The server's SETTINGS is not acknowledged: an ACK in the
/// middle of a header block would be a protocol error of the test's.
fn watch(s: &mut TcpStream, stream: u32, limit: Duration) -> End {
    let until = Instant::now() + limit;
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    loop {
        assert!(
            Instant::now() < until,
            "the server neither answered nor closed within {limit:?}"
        );
        let f = match read_frame(s) {
            Ok(f) => f,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => return End::Closed,
        };
        match f.kind {
            GOAWAY => return End::GoAway(f.error_code()),
            RST_STREAM if f.stream == stream => return End::Reset(f.error_code()),
            HEADERS if f.stream == stream => {
                return End::Status(status_of(&f.payload).expect("a :status"))
            }
            _ => {}
        }
    }
}

/// After a GOAWAY, the server closes the connection (within `limit`).
fn closes_within(s: &mut TcpStream, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut buf = [0u8; 16 * 1024];
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

/// The `:status` of a response header block as h2 encodes it: an indexed
/// field (RFC 7541 static table) or a literal of name index 8, its value
/// plain or Huffman-coded (only digits needed: Appendix B).
fn status_of(block: &[u8]) -> Option<u16> {
    const INDEXED: [(u8, u16); 7] = [
        (8, 200),
        (9, 204),
        (10, 206),
        (11, 304),
        (12, 400),
        (13, 404),
        (14, 500),
    ];
    let first = *block.first()?;
    if first & 0x80 != 0 {
        return INDEXED
            .iter()
            .find(|(i, _)| *i == first & 0x7f)
            .map(|(_, s)| *s);
    }
    // Literal with incremental indexing (0x40|8) or without (0x08) or
    // never indexed (0x18), name index 8 (:status).
    if !matches!(first, 0x48 | 0x08 | 0x18) {
        return None;
    }
    let (huffman, len) = (block[1] & 0x80 != 0, usize::from(block[1] & 0x7f));
    let value = block.get(2..2 + len)?;
    let text = if huffman {
        huffman_digits(value)?
    } else {
        String::from_utf8(value.to_vec()).ok()?
    };
    text.parse().ok()
}

/// Decodes HPACK Huffman codes for the digits 0-9 (RFC 7541 Appendix B:
/// '0'..'2' are 00000..00010, '3'..'9' are 011001..011111).
fn huffman_digits(bytes: &[u8]) -> Option<String> {
    let bits: Vec<u8> = bytes
        .iter()
        .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1))
        .collect();
    let mut out = String::new();
    let mut i = 0;
    let code = |from: usize, n: usize| -> Option<u8> {
        let s = bits.get(from..from + n)?;
        Some(s.iter().fold(0, |a, b| (a << 1) | b))
    };
    while i < bits.len() {
        // The rest is padding: a prefix of EOS (all ones), under 8 bits.
        if bits.len() - i < 8 && bits[i..].iter().all(|&b| b == 1) {
            break;
        }
        match code(i, 5)? {
            c @ 0..=2 => {
                out.push((b'0' + c) as char);
                i += 5;
            }
            _ => {
                let c = code(i, 6)?;
                if !(0b011001..=0b011111).contains(&c) {
                    return None;
                }
                out.push((b'3' + c - 0b011001) as char);
                i += 6;
            }
        }
    }
    Some(out)
}

/// A fresh h2c connection: the preface and an empty SETTINGS sent.
fn h2c(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    s.set_write_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(PREFACE).expect("preface");
    s.write_all(&frame(SETTINGS, 0, 0, &[])).expect("settings");
    s
}

/// A GET on a fresh connection gets 200: the server still serves.
fn still_serves(addr: SocketAddr) {
    let t = Instant::now();
    let mut s = h2c(addr);
    let block = request_block(false, "/index.html");
    s.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, 1, &block))
        .expect("request");
    assert_eq!(watch(&mut s, 1, Duration::from_secs(5)), End::Status(200));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

/// The server's resident memory, in KiB.
fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// What the attacks may cost the server in memory, at most.
const RSS_BOUND_KIB: u64 = 32 * 1024;

fn assert_bounded(server: &Server, before: u64, what: &str) {
    let after = rss_kib(server.pid());
    eprintln!("{what}: server RSS {before} KiB before, {after} KiB after");
    assert!(
        after < before + RSS_BOUND_KIB,
        "{what}: server RSS grew from {before} to {after} KiB"
    );
}

/// Writes `frames` copies of `one` from a thread until the server stops
/// taking them (a write times out or fails) or all are sent; returns how
/// many bytes went out.
fn flood(s: &TcpStream, one: Vec<u8>, frames: usize) -> thread::JoinHandle<u64> {
    let mut w = s.try_clone().expect("clone");
    thread::spawn(move || {
        // Many frames per write, as a real attacker would.
        let batch: Vec<u8> = one.iter().copied().cycle().take(one.len() * 256).collect();
        let mut sent = 0u64;
        let mut left = frames;
        while left > 0 {
            let n = left.min(256);
            if w.write_all(&batch[..n * one.len()]).is_err() {
                break;
            }
            sent += (n * one.len()) as u64;
            left -= n;
        }
        sent
    })
}

/// A document root with `index.html`, and a CGI script that reads its
/// request body (so a request with a body keeps its stream open).
fn site(tag: &str) -> (TempDir, Server) {
    let dir = TempDir::new(tag);
    dir.write("www/index.html", "hello\n");
    let p = dir.write(
        "cgi-bin/echo.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nexec cat\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cfg = dir.config(
        "stoa.toml",
        "[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = { dir = \"cgi-bin\" }\n",
    );
    let server = Server::with_config(&cfg);
    (dir, server)
}

fn warm_up(server: &Server) -> u64 {
    still_serves(server.addr);
    rss_kib(server.pid())
}

#[test]
fn cve_2024_27316_cve_2023_45288_a_continuation_flood_gets_goaway_enhance_your_calm() {
    let (_dir, server) = site("h2-continuation");
    let before = warm_up(&server);
    let mut s = h2c(server.addr);
    // HEADERS without END_HEADERS, then CONTINUATION frames that never
    // end the block: each carries a 100-byte header field, so the block
    // grows without end unless the server stops it.
    let block = request_block(false, "/index.html");
    s.write_all(&frame(HEADERS, END_STREAM, 1, &block))
        .expect("headers");
    let mut field = vec![0x00, 0x01, b'x', 100];
    field.extend_from_slice(&[b'a'; 100]);
    let writer = flood(&s, frame(CONTINUATION, 0, 1, &field), 200_000);
    let end = watch(&mut s, 1, Duration::from_secs(10));
    assert_eq!(end, End::GoAway(ENHANCE_YOUR_CALM));
    assert!(closes_within(&mut s, Duration::from_secs(5)));
    let sent = writer.join().expect("writer");
    eprintln!("continuation flood: {sent} bytes written before the close");
    assert_bounded(&server, before, "continuation flood");
    still_serves(server.addr);
}

#[test]
fn cve_2024_27316_empty_continuation_frames_are_counted_too() {
    let (_dir, server) = site("h2-continuation-empty");
    let before = warm_up(&server);
    let mut s = h2c(server.addr);
    let block = request_block(false, "/index.html");
    s.write_all(&frame(HEADERS, END_STREAM, 1, &block))
        .expect("headers");
    let writer = flood(&s, frame(CONTINUATION, 0, 1, &[]), 1_000_000);
    assert_eq!(
        watch(&mut s, 1, Duration::from_secs(10)),
        End::GoAway(ENHANCE_YOUR_CALM)
    );
    assert!(closes_within(&mut s, Duration::from_secs(5)));
    writer.join().expect("writer");
    assert_bounded(&server, before, "empty continuation flood");
    still_serves(server.addr);
}

/// A header block that adds one 4000-byte field to the HPACK dynamic
/// table, then refers to it `refs` times (one byte each: index 62, the
/// newest dynamic entry): it decodes to `refs` x 4 KB.
fn hpack_bomb(refs: usize) -> Vec<u8> {
    let mut b = request_block(false, "/index.html");
    // Literal with incremental indexing, new name "x-bomb" (RFC 7541
    // §6.2.1), value 4000 bytes: length 4000 = 127 + 3873 (7-bit prefix).
    b.extend_from_slice(&[0x40, 0x06]);
    b.extend_from_slice(b"x-bomb");
    b.extend_from_slice(&[0x7f, 0x80 | (3873 & 0x7f) as u8, (3873 >> 7) as u8]);
    b.extend_from_slice(&[b'a'; 4000]);
    b.extend(std::iter::repeat_n(0x80 | 62, refs));
    b
}

#[test]
fn cve_2016_6581_an_hpack_bomb_gets_431_or_goaway_and_memory_stays_bounded() {
    let (_dir, server) = site("h2-hpack-bomb");
    let before = warm_up(&server);

    // Just over the 16 KiB header list limit: the request is refused with
    // 431 on its stream (RFC 6585 §5), the connection stays.
    let mut s = h2c(server.addr);
    s.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, 1, &hpack_bomb(4)))
        .expect("headers");
    assert_eq!(watch(&mut s, 1, Duration::from_secs(10)), End::Status(431));

    // 12,000 references in one 16 KB frame, then more in CONTINUATION
    // frames: 100 MB of header list from 60 KB on the wire. Decoding stops
    // at a bound and the connection gets GOAWAY.
    let mut s = h2c(server.addr);
    let bomb = hpack_bomb(12_000);
    s.write_all(&frame(HEADERS, END_STREAM, 1, &bomb))
        .expect("headers");
    let more = vec![0x80 | 62; 12_000];
    for i in 0..3 {
        let flags = if i == 2 { END_HEADERS } else { 0 };
        if s.write_all(&frame(CONTINUATION, flags, 1, &more)).is_err() {
            break;
        }
    }
    let end = watch(&mut s, 1, Duration::from_secs(10));
    assert!(
        matches!(end, End::GoAway(ENHANCE_YOUR_CALM) | End::Status(431)),
        "{end:?}"
    );
    assert_bounded(&server, before, "hpack bomb");
    still_serves(server.addr);
}

/// A flood of `one` (a frame the server must acknowledge) from a client
/// that reads nothing: the server must not queue acknowledgements without
/// bound. It stops reading (h2 keeps one answer pending) and, past the
/// `[http2] max_control_frames` budget, sends GOAWAY ENHANCE_YOUR_CALM and
/// closes.
fn control_flood(tag: &str, one: Vec<u8>) {
    let (_dir, server) = site(tag);
    let before = warm_up(&server);
    let mut s = h2c(server.addr);
    let writer = flood(&s, one, 1_000_000);
    // Not reading while the flood goes out.
    let sent = writer.join().expect("writer");
    eprintln!("{tag}: {sent} bytes written before the server stopped taking them");
    assert!(sent < 64 << 20, "the server read {sent} bytes of flood");
    let end = watch(&mut s, 0, Duration::from_secs(10));
    assert!(
        matches!(end, End::GoAway(ENHANCE_YOUR_CALM) | End::Closed),
        "{end:?}"
    );
    assert_bounded(&server, before, tag);
    still_serves(server.addr);
}

#[test]
fn cve_2019_9515_a_settings_flood_without_reading_the_acks_is_bounded_and_closed() {
    // SETTINGS_MAX_CONCURRENT_STREAMS = 100: a valid setting, each frame
    // to be acknowledged.
    control_flood(
        "h2-settings-flood",
        frame(SETTINGS, 0, 0, &[0x00, 0x03, 0, 0, 0, 100]),
    );
}

#[test]
fn cve_2019_9512_a_ping_flood_without_reading_the_acks_is_bounded_and_closed() {
    control_flood("h2-ping-flood", frame(PING, 0, 0, b"floodme!"));
}

#[test]
fn cve_2019_9512_a_client_that_reads_its_ping_acks_still_meets_the_budget() {
    let (_dir, server) = site("h2-ping-read");
    let before = warm_up(&server);
    let mut s = h2c(server.addr);
    // The acknowledgements are read as they come: h2's backpressure
    // alone would let this go on for ever; the budget ends it.
    let writer = flood(&s, frame(PING, 0, 0, b"floodme!"), 1_000_000);
    let mut acks = 0u64;
    let until = Instant::now() + Duration::from_secs(20);
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let end = loop {
        assert!(Instant::now() < until, "no GOAWAY after {acks} PING ACKs");
        match read_frame(&mut s) {
            Ok(f) if f.kind == PING && f.flags & ACK != 0 => acks += 1,
            Ok(f) if f.kind == GOAWAY => break End::GoAway(f.error_code()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break End::Closed,
        }
    };
    eprintln!("ping flood: {acks} ACKs read, then {end:?}");
    assert_eq!(end, End::GoAway(ENHANCE_YOUR_CALM));
    assert!(acks < 100_000, "{acks} PINGs answered");
    writer.join().expect("writer");
    assert_bounded(&server, before, "ping flood, read");
    still_serves(server.addr);
}

#[test]
fn cve_2019_9518_empty_data_frames_on_an_open_stream_get_goaway_enhance_your_calm() {
    let (_dir, server) = site("h2-empty-data");
    let before = warm_up(&server);
    let mut s = h2c(server.addr);
    // A POST whose body the CGI script waits for: its stream stays open
    // while the client sends DATA frames with nothing in them.
    let mut block = request_block(true, "/cgi-bin/echo.sh");
    // content-type (static index 31), literal without indexing.
    block.extend_from_slice(&[0x0f, 0x10, 0x0a]);
    block.extend_from_slice(b"text/plain");
    s.write_all(&frame(HEADERS, END_HEADERS, 1, &block))
        .expect("headers");
    s.write_all(&frame(DATA, 0, 1, b"some body, "))
        .expect("data");
    let writer = flood(&s, frame(DATA, 0, 1, &[]), 1_000_000);
    let end = watch(&mut s, 1, Duration::from_secs(10));
    assert_eq!(end, End::GoAway(ENHANCE_YOUR_CALM));
    assert!(closes_within(&mut s, Duration::from_secs(5)));
    writer.join().expect("writer");
    assert_bounded(&server, before, "empty data flood");
    still_serves(server.addr);

    // DATA frames with padding only carry no data either (h2 gives their
    // window back at once, so they would cost the client nothing): they
    // count as empty.
    let mut s = h2c(server.addr);
    s.write_all(&frame(HEADERS, END_HEADERS, 1, &block))
        .expect("headers");
    let writer = flood(
        &s,
        frame(DATA, 0x8, 1, &[8, 0, 0, 0, 0, 0, 0, 0, 0]),
        1_000_000,
    );
    assert_eq!(
        watch(&mut s, 1, Duration::from_secs(10)),
        End::GoAway(ENHANCE_YOUR_CALM)
    );
    writer.join().expect("writer");
    still_serves(server.addr);
}

#[test]
fn the_control_frame_budget_is_set_in_the_http2_table() {
    let dir = TempDir::new("h2-budget-config");
    dir.write("www/index.html", "hello\n");
    let cfg = dir.config(
        "stoa.toml",
        "[http2]\nmax_control_frames = 0\n\n[[site]]\nroot = \"www\"\n",
    );
    let server = Server::with_config(&cfg);
    // With the budget off, 5,000 PINGs read as they are answered are all
    // answered.
    let mut s = h2c(server.addr);
    let writer = flood(&s, frame(PING, 0, 0, b"12345678"), 5_000);
    let mut acks = 0;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    while acks < 5_000 {
        let f = read_frame(&mut s).expect("a frame");
        assert_ne!(f.kind, GOAWAY, "{f:?} after {acks} ACKs");
        if f.kind == PING && f.flags & ACK != 0 {
            acks += 1;
        }
    }
    writer.join().expect("writer");
}

#[test]
fn the_status_decoder_reads_indexed_plain_and_huffman_statuses() {
    assert_eq!(status_of(&[0x88]), Some(200));
    assert_eq!(status_of(&[0x8d]), Some(404));
    assert_eq!(status_of(&[0x48, 0x03, b'4', b'3', b'1']), Some(431));
    // "431" Huffman-coded: 011010 011001 00001 + 7 bits of EOS padding.
    assert_eq!(status_of(&[0x48, 0x83, 0x69, 0x90, 0xff]), Some(431));
}
