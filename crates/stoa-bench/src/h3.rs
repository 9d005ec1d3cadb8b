//! HTTP/3 for the load generator (RFC 9114): what a client writes on a
//! request stream and reads from a response stream, sans-IO. The QUIC side
//! (quinn-proto on the engine's UDP sockets) is in `quic.rs` and the
//! engine's `h3` part.
//!
//! QPACK (RFC 9204) is used without its dynamic table, in both directions:
//! we announce SETTINGS_QPACK_MAX_TABLE_CAPACITY 0, so a server's field
//! sections refer only to the static table and literals, and our own
//! request sections are the same bytes on every stream of every
//! connection, encoded once before the run (as the HTTP/2 client does
//! with HPACK). So the client needs no encoder or decoder stream
//! (RFC 9204 §4.2 lets an endpoint not open them).
//!
//! This module holds the few QPACK pieces a client needs (the static
//! table entries it encodes with, and a field-section reader that finds
//! `:status` and `server`); Huffman strings are decoded by stoa-h2's HPACK
//! decoder, whose string format QPACK shares (RFC 9204 §4.1.2).

use stoa_h2::hpack::Decoder;

/// HTTP/3 frame types (RFC 9114 §7.2).
pub const DATA: u64 = 0x0;
pub const HEADERS: u64 = 0x1;
const CANCEL_PUSH: u64 = 0x3;
const SETTINGS: u64 = 0x4;
const PUSH_PROMISE: u64 = 0x5;
const GOAWAY: u64 = 0x7;
const MAX_PUSH_ID: u64 = 0xd;
/// Unidirectional stream types (§6.2).
pub const CONTROL_STREAM: u64 = 0x0;
/// SETTINGS_MAX_FIELD_SECTION_SIZE (§7.2.4.1).
const SETTINGS_MAX_FIELD_SECTION_SIZE: u64 = 0x6;
/// Largest response field section accepted.
pub const MAX_FIELD_SECTION: usize = 64 * 1024;

/// HTTP/3 error codes (RFC 9114 §8.1) the client sends or names.
pub const H3_NO_ERROR: u64 = 0x100;
pub const H3_REQUEST_CANCELLED: u64 = 0x10c;

/// The name of an HTTP/3 error code, for messages.
pub fn error_name(code: u64) -> String {
    let name = match code {
        0x100 => "H3_NO_ERROR",
        0x101 => "H3_GENERAL_PROTOCOL_ERROR",
        0x102 => "H3_INTERNAL_ERROR",
        0x103 => "H3_STREAM_CREATION_ERROR",
        0x104 => "H3_CLOSED_CRITICAL_STREAM",
        0x105 => "H3_FRAME_UNEXPECTED",
        0x106 => "H3_FRAME_ERROR",
        0x107 => "H3_EXCESSIVE_LOAD",
        0x108 => "H3_ID_ERROR",
        0x109 => "H3_SETTINGS_ERROR",
        0x10a => "H3_MISSING_SETTINGS",
        0x10b => "H3_REQUEST_REJECTED",
        0x10c => "H3_REQUEST_CANCELLED",
        0x10d => "H3_REQUEST_INCOMPLETE",
        0x10e => "H3_MESSAGE_ERROR",
        0x10f => "H3_CONNECT_ERROR",
        0x110 => "H3_VERSION_FALLBACK",
        0x200 => "QPACK_DECOMPRESSION_FAILED",
        0x201 => "QPACK_ENCODER_STREAM_ERROR",
        0x202 => "QPACK_DECODER_STREAM_ERROR",
        _ => return format!("0x{code:x}"),
    };
    format!("{name} (0x{code:x})")
}

/// Appends a QUIC variable-length integer (RFC 9000 §16).
pub fn put_varint(out: &mut Vec<u8>, v: u64) {
    if v < 1 << 6 {
        out.push(v as u8);
    } else if v < 1 << 14 {
        out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes());
    } else if v < 1 << 30 {
        out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes());
    } else {
        out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
    }
}

/// Reads a variable-length integer at the start of `b`: the value and its
/// length, or `None` when `b` holds only part of it.
pub fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    let bytes = b.get(..len)?;
    let mut v = u64::from(first & 0x3f);
    for &x in &bytes[1..] {
        v = v << 8 | u64::from(x);
    }
    Some((v, len))
}

fn put_frame_head(out: &mut Vec<u8>, kind: u64, len: usize) {
    put_varint(out, kind);
    put_varint(out, len as u64);
}

/// What the client writes on its control stream (§6.2.1): the stream type
/// and SETTINGS (§7.2.4), with the largest field section it accepts; the
/// QPACK settings keep their defaults of 0 (no dynamic table, no blocked
/// streams).
pub fn control_stream() -> Vec<u8> {
    let mut s = Vec::new();
    put_varint(&mut s, SETTINGS_MAX_FIELD_SECTION_SIZE);
    put_varint(&mut s, MAX_FIELD_SECTION as u64);
    let mut out = Vec::new();
    put_varint(&mut out, CONTROL_STREAM);
    put_frame_head(&mut out, SETTINGS, s.len());
    out.extend_from_slice(&s);
    out
}

// ---------------------------------------------------------------- QPACK

/// Static table entries (RFC 9204 Appendix A) the request encoder uses:
/// whole fields (an indexed field line) and names (a literal with a name
/// reference).
const STATIC_FIELDS: &[(&str, &str, u8)] = &[
    (":path", "/", 1),
    (":method", "CONNECT", 15),
    (":method", "DELETE", 16),
    (":method", "GET", 17),
    (":method", "HEAD", 18),
    (":method", "OPTIONS", 19),
    (":method", "POST", 20),
    (":method", "PUT", 21),
    (":scheme", "http", 22),
    (":scheme", "https", 23),
    ("accept", "*/*", 29),
    ("content-type", "application/x-www-form-urlencoded", 47),
    ("content-type", "text/plain", 53),
];
const STATIC_NAMES: &[(&str, u8)] = &[
    (":authority", 0),
    (":path", 1),
    ("content-length", 4),
    ("cookie", 5),
    (":method", 15),
    (":scheme", 22),
    ("accept", 29),
    ("content-type", 44),
    ("authorization", 84),
    ("user-agent", 95),
];

/// A QPACK prefixed integer (RFC 9204 §4.1.1, RFC 7541 §5.1) with `bits`
/// of prefix, the high bits of the first byte being `flags`.
fn put_int(out: &mut Vec<u8>, flags: u8, bits: u32, v: u64) {
    let max = (1u64 << bits) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut v = v - max;
    while v >= 128 {
        out.push(0x80 | (v & 0x7f) as u8);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a prefixed integer of `bits` at the start of `b`.
fn get_int(b: &[u8], bits: u32) -> Option<(u64, usize)> {
    let max = (1u64 << bits) - 1;
    let v = u64::from(*b.first()?) & max;
    if v < max {
        return Some((v, 1));
    }
    let (mut v, mut shift) = (v, 0u32);
    for (i, &x) in b.iter().enumerate().skip(1) {
        if shift > 56 {
            return None;
        }
        v += u64::from(x & 0x7f) << shift;
        shift += 7;
        if x & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Appends one field line of a request: indexed when the static table has
/// the whole field, a literal with a static name reference when it has the
/// name, a literal name otherwise; values are sent raw (no Huffman: the
/// section is encoded once per run, its size barely matters).
fn put_field(out: &mut Vec<u8>, name: &str, value: &str) {
    if let Some(&(_, _, i)) = STATIC_FIELDS
        .iter()
        .find(|(n, v, _)| *n == name && *v == value)
    {
        // Indexed field line, static (§4.5.2): 1 T=1 index(6).
        put_int(out, 0xc0, 6, u64::from(i));
        return;
    }
    if let Some(&(_, i)) = STATIC_NAMES.iter().find(|(n, _)| *n == name) {
        // Literal with name reference, static (§4.5.4): 01 N=0 T=1 index(4).
        put_int(out, 0x50, 4, u64::from(i));
    } else {
        // Literal with literal name (§4.5.6): 001 N=0 H=0 length(3).
        put_int(out, 0x20, 3, name.len() as u64);
        out.extend_from_slice(name.as_bytes());
    }
    put_int(out, 0x00, 7, value.len() as u64);
    out.extend_from_slice(value.as_bytes());
}

/// A request as HTTP/3 sends it: the whole request stream (HEADERS and,
/// with a body, DATA), the same on every stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H3Request {
    pub wire: Vec<u8>,
}

impl H3Request {
    /// The HTTP/3 form of a serialized HTTP/1 request (its last `body_len`
    /// bytes the body), with the same fields as over HTTP/2 (RFC 9114
    /// §4.2, §4.3.1: pseudo-headers, lowercase names, no connection-
    /// specific fields).
    pub fn from_h1(bytes: &[u8], body_len: usize, scheme: &str) -> Result<H3Request, String> {
        let split = bytes.len().saturating_sub(body_len);
        let (head, body) = bytes.split_at(split);
        let text = std::str::from_utf8(head).map_err(|_| "a request head is not UTF-8")?;
        let mut lines = text.split("\r\n");
        let line = lines.next().unwrap_or_default();
        let mut parts = line.split(' ');
        let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
            return Err(format!("bad request line {line:?}"));
        };
        let mut authority = None;
        let mut fields = Vec::new();
        for l in lines {
            let Some((name, value)) = l.split_once(':') else {
                continue;
            };
            let (name, value) = (name.trim(), value.trim());
            if name.eq_ignore_ascii_case("host") {
                authority = Some(value.to_string());
            } else if !dropped(name) {
                fields.push((name.to_ascii_lowercase(), value.to_string()));
            }
        }
        // Field section prefix (§4.5.1): Required Insert Count 0, Base 0.
        let mut section = vec![0, 0];
        put_field(&mut section, ":method", method);
        put_field(&mut section, ":scheme", scheme);
        if let Some(a) = &authority {
            put_field(&mut section, ":authority", a);
        }
        put_field(&mut section, ":path", path);
        for (n, v) in &fields {
            put_field(&mut section, n, v);
        }
        let mut wire = Vec::with_capacity(section.len() + body.len() + 16);
        put_frame_head(&mut wire, HEADERS, section.len());
        wire.extend_from_slice(&section);
        if !body.is_empty() {
            put_frame_head(&mut wire, DATA, body.len());
            wire.extend_from_slice(body);
        }
        Ok(H3Request { wire })
    }
}

/// Fields of HTTP/1 that HTTP/3 forbids (RFC 9114 §4.2) or carries as a
/// pseudo-header (`Host` becomes `:authority`, §4.3.1).
fn dropped(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "host",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

/// Why a response stream failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H3Error {
    /// A frame not allowed on a request stream, a bad frame, or a field
    /// section we cannot decode: a connection error (RFC 9114 §7.1,
    /// §4.1.2; RFC 9204 §2.2.3), reported as *malformed*.
    Protocol(u64),
}

/// A Huffman-coded or raw QPACK string at the start of `b` (H bit and a
/// 7-bit length prefix, the same format as HPACK's): its value and the
/// bytes it took. Huffman is decoded by HPACK's decoder, fed a literal
/// field whose value is these very bytes.
fn get_string(b: &[u8], hpack: &mut Decoder) -> Option<(Vec<u8>, usize)> {
    let (len, n) = get_int(b, 7)?;
    let end = n.checked_add(usize::try_from(len).ok()?)?;
    let raw = b.get(..end)?;
    if b[0] & 0x80 == 0 {
        return Some((raw[n..].to_vec(), end));
    }
    // Literal without indexing, new name "x" (RFC 7541 §6.2.2).
    let mut block = vec![0x00, 0x01, b'x'];
    block.extend_from_slice(raw);
    let mut value = None;
    hpack
        .decode(&block, MAX_FIELD_SECTION, &mut |_, v| {
            value = Some(v.to_vec())
        })
        .ok()?;
    Some((value?, end))
}

/// `:status` of a static table entry (RFC 9204 Appendix A).
fn static_status(i: u64) -> Option<u16> {
    Some(match i {
        24 => 103,
        25 => 200,
        26 => 304,
        27 => 404,
        28 => 503,
        63 => 100,
        64 => 204,
        65 => 206,
        66 => 302,
        67 => 400,
        68 => 403,
        69 => 421,
        70 => 425,
        71 => 500,
        _ => return None,
    })
}

fn is_status_name(i: u64) -> bool {
    static_status(i).is_some()
}

const SERVER_NAME_INDEX: u64 = 92;
const QPACK_FAILED: u64 = 0x200;

/// Reads a response field section: its `:status` (0 if none) and, when
/// `want_server`, its `server` field.
pub fn read_section(
    b: &[u8],
    want_server: bool,
    hpack: &mut Decoder,
) -> Result<(u16, Option<Vec<u8>>), H3Error> {
    let bad = H3Error::Protocol(QPACK_FAILED);
    let (ric, n) = get_int(b, 8).ok_or(bad)?;
    if ric != 0 {
        // A dynamic table reference: we allowed none (RFC 9204 §4.5.1.1).
        return Err(bad);
    }
    let mut pos = n;
    let (_, n) = get_int(b.get(pos..).ok_or(bad)?, 7).ok_or(bad)?;
    pos += n;
    let (mut status, mut server) = (0u16, None);
    let parse_status = |v: &[u8]| -> u16 {
        std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    };
    while pos < b.len() {
        let rest = &b[pos..];
        let first = rest[0];
        if first & 0x80 != 0 {
            // Indexed field line: T must be static.
            if first & 0x40 == 0 {
                return Err(bad);
            }
            let (i, n) = get_int(rest, 6).ok_or(bad)?;
            if let Some(s) = static_status(i) {
                status = s;
            }
            pos += n;
        } else if first & 0x40 != 0 {
            // Literal with name reference.
            if first & 0x10 == 0 {
                return Err(bad);
            }
            let (i, n) = get_int(rest, 4).ok_or(bad)?;
            let (v, m) = get_string(&rest[n..], hpack).ok_or(bad)?;
            if is_status_name(i) {
                status = parse_status(&v);
            } else if want_server && i == SERVER_NAME_INDEX {
                server = Some(v);
            }
            pos += n + m;
        } else if first & 0x20 != 0 {
            // Literal with literal name: H bit and a 3-bit length prefix.
            let (len, n) = get_int(rest, 3).ok_or(bad)?;
            let end = n + usize::try_from(len).map_err(|_| bad)?;
            let raw = rest.get(n..end).ok_or(bad)?;
            let name = if first & 0x08 != 0 {
                let mut block = vec![0x00, 0x01, b'x'];
                put_int(&mut block, 0x80, 7, len);
                block.extend_from_slice(raw);
                let mut out = None;
                hpack
                    .decode(&block, MAX_FIELD_SECTION, &mut |_, v| {
                        out = Some(v.to_vec())
                    })
                    .map_err(|_| bad)?;
                out.ok_or(bad)?
            } else {
                raw.to_vec()
            };
            let (v, m) = get_string(&rest[end..], hpack).ok_or(bad)?;
            if name == b":status" {
                status = parse_status(&v);
            } else if want_server && name == b"server" {
                server = Some(v);
            }
            pos += end + m;
        } else {
            // Post-base references (§4.5.3, §4.5.5): the dynamic table.
            return Err(bad);
        }
    }
    Ok((status, server))
}

/// The response read from one request stream.
#[derive(Debug, Default)]
pub struct Response {
    /// The final status (0 until its HEADERS).
    pub status: u16,
    /// DATA payload bytes.
    pub body: u64,
    /// Bytes of the stream, frames included.
    pub wire: u64,
    /// The `server` field, when asked for.
    pub server: Option<Vec<u8>>,
    /// Bytes of a frame head or HEADERS frame not complete yet.
    partial: Vec<u8>,
    /// Payload bytes of the current DATA (or skipped) frame still to come.
    data_left: u64,
    skipping: bool,
}

impl Response {
    /// Takes bytes of the stream.
    pub fn feed(
        &mut self,
        mut data: &[u8],
        want_server: bool,
        hpack: &mut Decoder,
    ) -> Result<(), H3Error> {
        self.wire += data.len() as u64;
        while !data.is_empty() {
            if self.data_left > 0 {
                let n = (self.data_left.min(data.len() as u64)) as usize;
                if !self.skipping {
                    self.body += n as u64;
                }
                self.data_left -= n as u64;
                data = &data[n..];
                continue;
            }
            // A frame head, then (HEADERS) its payload, gathered in
            // `partial` when it spans reads.
            let buf: &[u8] = if self.partial.is_empty() {
                data
            } else {
                self.partial.extend_from_slice(data);
                &self.partial
            };
            let Some((kind, a)) = get_varint(buf) else {
                return self.keep(data);
            };
            let Some((len, b)) = get_varint(&buf[a..]) else {
                return self.keep(data);
            };
            let head = a + b;
            let from_partial = !self.partial.is_empty();
            // Bytes of `data` the head took (the rest of it was in
            // `partial` already).
            let before = if from_partial {
                self.partial.len() - data.len()
            } else {
                0
            };
            match kind {
                DATA => {
                    if self.status == 0 {
                        // DATA before HEADERS (RFC 9114 §4.1).
                        return Err(H3Error::Protocol(0x105));
                    }
                    self.data_left = len;
                    self.skipping = false;
                }
                HEADERS => {
                    let len = usize::try_from(len).map_err(|_| H3Error::Protocol(0x106))?;
                    if len > MAX_FIELD_SECTION {
                        return Err(H3Error::Protocol(0x106));
                    }
                    if buf.len() < head + len {
                        return self.keep(data);
                    }
                    let (status, server) =
                        read_section(&buf[head..head + len], want_server, hpack)?;
                    let taken = head + len - before;
                    self.partial.clear();
                    if self.status == 0 {
                        // Interim responses (1xx) precede the final one.
                        if !(100..200).contains(&status) {
                            if status == 0 {
                                return Err(H3Error::Protocol(0x10e));
                            }
                            self.status = status;
                            self.server = server;
                        }
                    }
                    // A HEADERS after the final one is trailers.
                    data = &data[taken..];
                    continue;
                }
                CANCEL_PUSH | SETTINGS | GOAWAY | MAX_PUSH_ID | PUSH_PROMISE => {
                    // Not allowed on a request stream (§7.2.3 to §7.2.7);
                    // PUSH_PROMISE without MAX_PUSH_ID is H3_ID_ERROR.
                    return Err(H3Error::Protocol(if kind == PUSH_PROMISE {
                        0x108
                    } else {
                        0x105
                    }));
                }
                _ => {
                    // Reserved and unknown types are skipped (§9).
                    self.data_left = len;
                    self.skipping = true;
                }
            }
            let taken = head - before;
            self.partial.clear();
            data = &data[taken..];
        }
        Ok(())
    }

    fn keep(&mut self, data: &[u8]) -> Result<(), H3Error> {
        if self.partial.is_empty() {
            self.partial.extend_from_slice(data);
        }
        if self.partial.len() > MAX_FIELD_SECTION + 16 {
            return Err(H3Error::Protocol(0x106));
        }
        Ok(())
    }

    /// The stream ended (FIN): whether the response was whole (a final
    /// status, and no frame cut short: RFC 9114 §4.1, H3_FRAME_ERROR).
    pub fn complete(&self) -> bool {
        self.status != 0 && self.data_left == 0 && self.partial.is_empty()
    }
}

/// The server's control stream (§6.2.1): read for GOAWAY (§5.2), the rest
/// is skipped. The stream type byte has been taken.
#[derive(Debug, Default)]
pub struct Control {
    partial: Vec<u8>,
    skip: u64,
    pub goaway: bool,
}

impl Control {
    pub fn feed(&mut self, mut data: &[u8]) {
        let n = self.skip.min(data.len() as u64) as usize;
        self.skip -= n as u64;
        data = &data[n..];
        self.partial.extend_from_slice(data);
        loop {
            let Some((kind, a)) = get_varint(&self.partial) else {
                return;
            };
            let Some((len, b)) = get_varint(&self.partial[a..]) else {
                return;
            };
            if kind == GOAWAY {
                self.goaway = true;
            }
            let have = (self.partial.len() - a - b) as u64;
            if have >= len {
                self.partial.drain(..a + b + len as usize);
            } else {
                // The rest of this frame is skipped as it comes.
                self.skip = len - have;
                self.partial.clear();
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(bytes: &[u8], body: usize) -> H3Request {
        H3Request::from_h1(bytes, body, "https").expect("converts")
    }

    /// Decodes our own request section with the rules a server applies.
    fn fields_of(section: &[u8]) -> Vec<(String, String)> {
        let names: &[(u64, &str)] = &[
            (0, ":authority"),
            (1, ":path"),
            (4, "content-length"),
            (5, "cookie"),
            (15, ":method"),
            (22, ":scheme"),
            (29, "accept"),
            (44, "content-type"),
            (84, "authorization"),
            (95, "user-agent"),
        ];
        let mut out = Vec::new();
        let mut pos = 2;
        while pos < section.len() {
            let r = &section[pos..];
            if r[0] & 0xc0 == 0xc0 {
                let (i, n) = get_int(r, 6).expect("index");
                let (name, value, _) = STATIC_FIELDS
                    .iter()
                    .find(|f| u64::from(f.2) == i)
                    .expect("a static entry we use");
                out.push((name.to_string(), value.to_string()));
                pos += n;
            } else if r[0] & 0xf0 == 0x50 {
                let (i, n) = get_int(r, 4).expect("index");
                let name = names.iter().find(|x| x.0 == i).expect("a name").1;
                let (len, m) = get_int(&r[n..], 7).expect("length");
                let v = &r[n + m..n + m + len as usize];
                out.push((name.into(), String::from_utf8_lossy(v).into()));
                pos += n + m + len as usize;
            } else {
                assert_eq!(r[0] & 0xe0, 0x20, "literal name, no Huffman");
                let (len, n) = get_int(r, 3).expect("length");
                let name = &r[n..n + len as usize];
                let r2 = &r[n + len as usize..];
                let (vl, m) = get_int(r2, 7).expect("length");
                let v = &r2[m..m + vl as usize];
                out.push((
                    String::from_utf8_lossy(name).into(),
                    String::from_utf8_lossy(v).into(),
                ));
                pos += n + len as usize + m + vl as usize;
            }
        }
        out
    }

    #[test]
    fn varints_round_trip_at_every_length() {
        // RFC 9000 §16 and its Appendix A.1 examples.
        for v in [
            0,
            37,
            63,
            64,
            15293,
            16383,
            16384,
            494_878_333,
            1 << 30,
            151_288_809_941_952_652,
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(get_varint(&b), Some((v, b.len())), "{v}");
            assert_eq!(get_varint(&b[..b.len() - 1]), None);
        }
        assert_eq!(get_varint(&[0x7b, 0xbd]), Some((15293, 2)));
    }

    #[test]
    fn a_request_becomes_headers_with_pseudo_fields_first_and_a_data_frame_for_its_body() {
        // RFC 9114 §4.3.1 (pseudo-headers first, :authority from Host),
        // §4.2 (lowercase names, no connection-specific fields), §4.1
        // (HEADERS, then DATA).
        let h1 = b"POST /f?x=1 HTTP/1.1\r\nHost: h:8443\r\nUser-Agent: b\r\nConnection: keep-alive\r\nX-Y: z\r\nContent-Length: 3\r\n\r\nabc";
        let r = req(h1, 3);
        let (kind, a) = get_varint(&r.wire).expect("type");
        let (len, b) = get_varint(&r.wire[a..]).expect("length");
        assert_eq!(kind, HEADERS);
        let section = &r.wire[a + b..a + b + len as usize];
        assert_eq!(&section[..2], &[0, 0], "no dynamic table references");
        let want: Vec<(String, String)> = [
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "h:8443"),
            (":path", "/f?x=1"),
            ("user-agent", "b"),
            ("x-y", "z"),
            ("content-length", "3"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(fields_of(section), want);
        let rest = &r.wire[a + b + len as usize..];
        assert_eq!(rest, [0x00, 0x03, b'a', b'b', b'c']);
    }

    fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_frame_head(&mut out, kind, payload.len());
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn a_response_split_anywhere_gives_its_status_server_and_body_length() {
        // `:status 200` indexed (static 25), `server` as a literal with a
        // static name reference (92) and a Huffman value ("stoa"), an
        // unknown frame type to skip (RFC 9114 §9), two DATA frames.
        let mut section = vec![0, 0, 0xc0 | 25, 0x5f, 92 - 15];
        // "stoa" in HPACK's Huffman code.
        let mut block = Vec::new();
        stoa_h2::hpack::Encoder::field(&mut block, b"x", b"stoa");
        // The encoder's string: after 0x00, name length, name.
        section.extend_from_slice(&block[3..]);
        let mut wire = frame(HEADERS, &section);
        wire.extend(frame(0x21, b"reserved"));
        wire.extend(frame(DATA, b"hello"));
        wire.extend(frame(DATA, &[7u8; 300]));
        for cut in 0..wire.len() {
            let mut r = Response::default();
            let mut d = Decoder::new(0);
            r.feed(&wire[..cut], true, &mut d).expect("first part");
            r.feed(&wire[cut..], true, &mut d).expect("second part");
            assert_eq!((r.status, r.body), (200, 305), "cut {cut}");
            assert_eq!(r.server.as_deref(), Some(&b"stoa"[..]), "cut {cut}");
            assert!(r.complete());
        }
    }

    #[test]
    fn a_literal_status_an_interim_response_and_trailers_are_read() {
        // 103 then a literal `:status 201` (name reference 24), then a
        // trailer section (RFC 9114 §4.1).
        let mut wire = frame(HEADERS, &[0, 0, 0xc0 | 24]);
        wire.extend(frame(HEADERS, &[0, 0, 0x5f, 24 - 15, 3, b'2', b'0', b'1']));
        wire.extend(frame(DATA, b"x"));
        wire.extend(frame(HEADERS, &[0, 0, 0x23, b'x', b'-', b't', 1, b'1']));
        let mut r = Response::default();
        r.feed(&wire, false, &mut Decoder::new(0)).expect("reads");
        assert_eq!((r.status, r.body), (201, 1));
        assert!(r.complete());
    }

    #[test]
    fn a_cut_frame_is_incomplete_and_frames_of_the_control_stream_are_refused() {
        // §4.1: a stream that ends inside a frame is malformed; §7.2.4:
        // SETTINGS on a request stream is H3_FRAME_UNEXPECTED; RFC 9204
        // §2.2.3: a dynamic reference we never allowed fails decoding.
        let mut wire = frame(HEADERS, &[0, 0, 0xc0 | 25]);
        wire.extend(frame(DATA, b"hello"));
        let mut r = Response::default();
        r.feed(&wire[..wire.len() - 1], false, &mut Decoder::new(0))
            .expect("reads");
        assert!(!r.complete());
        let mut r = Response::default();
        let e = r.feed(&frame(SETTINGS, &[]), false, &mut Decoder::new(0));
        assert_eq!(e, Err(H3Error::Protocol(0x105)));
        let mut r = Response::default();
        let e = r.feed(&frame(HEADERS, &[1, 0, 0x80]), false, &mut Decoder::new(0));
        assert_eq!(e, Err(H3Error::Protocol(0x200)));
    }

    #[test]
    fn the_control_stream_opens_with_settings_and_a_goaway_from_the_server_is_seen() {
        // RFC 9114 §6.2.1: the first frame of a control stream is SETTINGS.
        let c = control_stream();
        assert_eq!(c[0], 0x00);
        assert_eq!(get_varint(&c[1..]).map(|x| x.0), Some(SETTINGS));
        let mut ctl = Control::default();
        let mut wire = frame(SETTINGS, &[0x06, 0x44, 0x00]);
        wire.extend(frame(GOAWAY, &[0x08]));
        for b in wire.chunks(1) {
            ctl.feed(b);
        }
        assert!(ctl.goaway);
    }
}
