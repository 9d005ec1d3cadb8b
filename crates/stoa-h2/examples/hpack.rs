//! Decodes a Chrome-like request header block, or encodes a static file's
//! response head, N times, for measuring HPACK with callgrind
//! (docs/BENCHMARKS.md, "HPACK (stoa-h2)"): Ir per block = (Ir at N2 - Ir
//! at N1) / (N2 - N1).
//!
//! ```text
//! cargo build --release -p stoa-h2 --example hpack
//! valgrind --tool=callgrind target/release/examples/hpack first 2000
//! valgrind --tool=callgrind target/release/examples/hpack first 6000
//! ```
//!
//! Modes: `first`, a connection's first request (every field a literal,
//! Huffman-coded, entered into the dynamic table, on a fresh decoder each
//! time); `repeat`, a later request on the same connection (fields indexed
//! from the table, a new `:path` as a Huffman literal); `encode`, the
//! response head of a static file (into a reused buffer).

use std::hint::black_box;

use stoa_h2::hpack::{Decoder, Encoder};

/// What Chrome sends for a page on a first visit (cookie shortened).
const FIELDS: &[(&str, &str)] = &[
    (":method", "GET"),
    (":authority", "www.example.com"),
    (":scheme", "https"),
    (":path", "/static/app.js?v=1358"),
    ("sec-ch-ua", "\"Chromium\";v=\"131\", \"Not_A Brand\";v=\"24\""),
    ("sec-ch-ua-mobile", "?0"),
    ("sec-ch-ua-platform", "\"Linux\""),
    ("upgrade-insecure-requests", "1"),
    (
        "user-agent",
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    ),
    (
        "accept",
        "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
    ),
    ("sec-fetch-site", "none"),
    ("sec-fetch-mode", "navigate"),
    ("sec-fetch-user", "?1"),
    ("sec-fetch-dest", "document"),
    ("accept-encoding", "gzip, deflate, br, zstd"),
    ("accept-language", "en-US,en;q=0.9"),
    ("cookie", "session=4f2a9c81e0b7d6a5; theme=dark"),
];

/// `Encoder::field`'s literal without indexing, turned into one with
/// incremental indexing (§6.2.1: 01 and a 6-bit name index), as a
/// browser's first request sends it.
fn indexed_literal(out: &mut Vec<u8>, name: &str, value: &str) {
    let mut lit = Vec::new();
    Encoder::field(&mut lit, name.as_bytes(), value.as_bytes());
    let (idx, rest) = match lit[0] {
        0x0f => (15 + usize::from(lit[1]), &lit[2..]),
        b => (usize::from(b), &lit[1..]),
    };
    out.push(0x40 | idx as u8);
    out.extend_from_slice(rest);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "repeat".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000);

    let mut first = Vec::new();
    for (name, value) in FIELDS {
        indexed_literal(&mut first, name, value);
    }
    // The later request: every field but :path by its dynamic index
    // (62 is the newest, the cookie), :path a new literal.
    let mut repeat = Vec::new();
    for (i, (name, _)) in FIELDS.iter().enumerate() {
        if *name == ":path" {
            Encoder::field(&mut repeat, b":path", b"/static/img/logo.png");
        } else {
            // At most 62 + 16: one byte (7-bit prefix).
            let idx = 62 + FIELDS.len() - 1 - i;
            repeat.push(0x80 | idx as u8);
        }
    }

    if mode == "encode" {
        let mut out = Vec::new();
        for _ in 0..n {
            out.clear();
            encode_head(&mut out);
            black_box(&out);
        }
        println!("encode: {n} heads of {} bytes", out.len());
        return;
    }

    let mut fields = 0usize;
    let mut count = |n: &[u8], v: &[u8]| fields += n.len() + v.len();
    let mut conn = Decoder::new(4096);
    if conn.decode(&first, 1 << 16, &mut count).is_err() {
        eprintln!("the first block does not decode");
        std::process::exit(1);
    }
    for _ in 0..n {
        let ok = match mode.as_str() {
            "first" => Decoder::new(4096)
                .decode(black_box(&first), 1 << 16, &mut count)
                .is_ok(),
            _ => conn.decode(black_box(&repeat), 1 << 16, &mut count).is_ok(),
        };
        if !ok {
            eprintln!("decode failed");
            std::process::exit(1);
        }
    }
    println!(
        "{mode}: {n} decodes, first block {} bytes, repeat block {} bytes, {} field bytes",
        first.len(),
        repeat.len(),
        black_box(fields)
    );
}

/// What Stoa sends before a 1358-byte static file.
fn encode_head(out: &mut Vec<u8>) {
    Encoder::status(out, 200);
    Encoder::field(out, b"server", black_box(b"stoa"));
    Encoder::field(out, b"date", black_box(b"Fri, 27 Nov 2026 01:17:00 GMT"));
    Encoder::field(out, b"content-type", black_box(b"text/html; charset=utf-8"));
    Encoder::field(out, b"content-length", black_box(b"1358"));
    Encoder::field(
        out,
        b"last-modified",
        black_box(b"Thu, 26 Nov 2026 22:40:13 GMT"),
    );
    Encoder::field(out, b"etag", black_box(b"\"6927817d-54e\""));
    Encoder::field(out, b"accept-ranges", black_box(b"bytes"));
}
