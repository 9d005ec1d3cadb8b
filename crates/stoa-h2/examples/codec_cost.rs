//! The codec's own cost per request, for callgrind: N requests as h2load
//! sends them (`-m 10`: ten HEADERS per read; nghttp2's HPACK, so after the
//! first request every field is a dynamic table reference), each answered
//! with a cached response head and a 1,358-byte body, the output consumed
//! as if written. No socket, no server: frames, HPACK decoding, request
//! checks, stream states, flow control, response framing.
//!
//! `valgrind --tool=callgrind target/release/examples/codec_cost 2000`,
//! then 6000: Ir per request = difference / 4000 (docs/BENCHMARKS.md).

use bytes::BytesMut;
use stoa_h2::frame::{self, PREFACE};
use stoa_h2::hpack::Encoder;
use stoa_h2::{Config, Conn, Event};

/// A literal with incremental indexing, new name (RFC 7541 §6.2.1), no
/// Huffman: the first request fills the client's table.
fn literal(b: &mut Vec<u8>, name: &str, value: &str) {
    b.push(0x40);
    b.push(name.len() as u8);
    b.extend_from_slice(name.as_bytes());
    b.push(value.len() as u8);
    b.extend_from_slice(value.as_bytes());
}

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let fields = [
        (":path", "/index.html"),
        (":authority", "127.0.0.1:18520"),
        ("user-agent", "h2load nghttp2/1.52.0"),
        ("accept", "*/*"),
        ("accept-encoding", "gzip, deflate, br"),
    ];
    // :method GET and :scheme https are static (2, 7).
    let mut first = vec![0x82, 0x87];
    for (name, value) in fields {
        literal(&mut first, name, value);
    }
    // Later requests: the five dynamic entries, newest first (62..66).
    let later: Vec<u8> = [
        0x82,
        0x87,
        0x80 | 66,
        0x80 | 65,
        0x80 | 64,
        0x80 | 63,
        0x80 | 62,
    ]
    .to_vec();
    let mut head = Vec::new();
    Encoder::status(&mut head, 200);
    Encoder::field(&mut head, b"server", b"stoa");
    Encoder::field(&mut head, b"content-type", b"text/html");
    Encoder::field(&mut head, b"content-length", b"1358");
    Encoder::field(
        &mut head,
        b"last-modified",
        b"Fri, 27 Nov 2026 01:00:00 GMT",
    );
    Encoder::field(&mut head, b"etag", b"\"6746b3f0-54e\"");
    let body = vec![b'x'; 1358];

    let mut conn = Conn::new(&Config {
        initial_window_size: 1 << 20,
        initial_connection_window_size: 1 << 20,
        ..Config::default()
    });
    let mut input = BytesMut::with_capacity(1 << 16);
    input.extend_from_slice(PREFACE);
    let mut wire = Vec::new();
    frame::put_frame(&mut wire, frame::SETTINGS, 0, 0, &[]);
    input.extend_from_slice(&wire);
    let mut written = 0usize;
    let mut id = 1u32;
    let mut served = 0u32;
    while served < n {
        wire.clear();
        for _ in 0..10 {
            let block = if id == 1 { &first } else { &later };
            frame::put_frame(&mut wire, frame::HEADERS, 0x5, id, block);
            id += 2;
        }
        // The client's window updates, as h2load sends them.
        frame::put_frame(
            &mut wire,
            frame::WINDOW_UPDATE,
            0,
            0,
            &13_580u32.to_be_bytes(),
        );
        input.extend_from_slice(&wire);
        if let Err(e) = conn.recv(&mut input) {
            panic!("{e}");
        }
        while let Some(e) = conn.next_event() {
            if let Event::Request { id, head: req, .. } = e {
                assert_eq!(req.path(), Some(&b"/index.html"[..]));
                conn.send_headers(id, &head, false);
                conn.send_data(id, &body, true);
                served += 1;
            }
        }
        written += conn.output().len();
        conn.consume_output(conn.output().len());
    }
    println!("{served} requests, {written} bytes out");
}
