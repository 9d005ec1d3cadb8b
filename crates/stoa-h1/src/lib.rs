//! Sans-IO HTTP/1.x codec (RFC 9112).
//!
//! Parsing and encoding are plain functions over byte buffers: no sockets, no
//! timers, no allocation beyond what the caller asks for. The same crate serves
//! the server (request heads, request bodies, response heads), the reverse
//! proxy client and the load generator (request encoding, response heads and
//! bodies).
//!
//! - [`request`]: parse a request head into a [`RequestHead`] and decide its
//!   body framing (RFC 9112 §6) with the anti-smuggling rules of §6.3.
//! - [`response`]: parse a response head (client side) and encode one
//!   (server side).
//! - [`body`]: content-length and chunked decoders (§6.2, §7.1) and the
//!   chunked encoder.
//! - [`proxy`]: the reverse proxy's client side: the upstream request head
//!   (hop-by-hop fields, `Forwarded`, `Via`, body framing), reading the
//!   upstream's response (1xx, tunnels, reuse) and the head the client sees.
//! - [`proxy_protocol`]: the PROXY protocol header (v1 and v2) a load
//!   balancer sends ahead of a connection, with the client's address.

pub mod body;
pub mod cidr;
pub mod proxy;
pub mod proxy_protocol;
pub mod request;
pub mod response;

pub use body::{BodyDecoder, BodyError};
pub use request::{Method, ParseError, RequestHead, RequestLimits};
pub use response::{reason_phrase, ResponseHead};

/// HTTP minor version: `HTTP/1.0` or `HTTP/1.1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        }
    }
}

/// How the body of a message is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body at all.
    None,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the connection closes (responses only).
    Close,
}

/// ASCII case-insensitive comparison of a header name or token.
#[inline]
pub fn eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Iterates over the elements of a comma-separated header list (RFC 9110
/// §5.6.1), trimming optional whitespace and skipping empty elements.
pub fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').filter_map(|item| {
        let t = trim(item);
        if t.is_empty() {
            None
        } else {
            Some(t)
        }
    })
}

/// Trims spaces and horizontal tabs (OWS) from both ends.
pub fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// Parses a non-negative decimal integer as used by Content-Length: digits
/// only, no sign, no whitespace, no overflow.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 {
        // 19 digits always fit in u64; longer values are rejected rather than
        // risk a silent wrap.
        return None;
    }
    let mut n: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    Some(n)
}

/// Appends the decimal form of `n` without going through `fmt`.
pub fn push_u64(buf: &mut Vec<u8>, mut n: u64) {
    // Two digits per division, from a table: Content-Length, the octets of
    // an address and a port are written for every proxied request, and a
    // digit per division was ~50 instructions a number (callgrind).
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    while n >= 100 {
        let d = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[d..d + 2]);
    }
    if n >= 10 {
        let d = n as usize * 2;
        i -= 2;
        tmp[i..i + 2].copy_from_slice(&DIGIT_PAIRS[d..d + 2]);
    } else {
        i -= 1;
        tmp[i] = b'0' + n as u8;
    }
    buf.extend_from_slice(&tmp[i..]);
}

static DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// Appends an IPv4 address in dotted-decimal (as `Display` writes it).
/// `write!` goes through `core::fmt`, whose padding machinery made
/// formatting the client's address (twice a request: `Forwarded` and
/// `X-Forwarded-For`, and the access log) a tenth of a proxied request's instructions
/// (callgrind).
pub fn push_ipv4(out: &mut Vec<u8>, a: std::net::Ipv4Addr) {
    // Into a stack buffer, then one copy: a push per byte checks the
    // capacity each time.
    let mut buf = [0u8; 15];
    let mut n = 0;
    for (i, o) in a.octets().into_iter().enumerate() {
        if i > 0 {
            buf[n] = b'.';
            n += 1;
        }
        if o >= 100 {
            buf[n] = b'0' + o / 100;
            n += 1;
        }
        if o >= 10 {
            buf[n] = b'0' + o / 10 % 10;
            n += 1;
        }
        buf[n] = b'0' + o % 10;
        n += 1;
    }
    out.extend_from_slice(&buf[..n]);
}

/// RFC 9110 §5.6.2 `tchar`: what a field name, a method and a token are
/// made of.
/// A table: `contains` on the 15 symbols went through `memchr` for every
/// byte of every field name forwarded (180 instructions for a name like
/// `User-Agent`, callgrind).
#[inline]
pub fn is_tchar(b: u8) -> bool {
    TCHAR[usize::from(b)]
}

pub(crate) static TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_items_trim_ows_and_skip_empty_elements_rfc9110_5_6_1() {
        let v: Vec<&[u8]> = list_items(b" a ,, b\t,c,").collect();
        assert_eq!(v, vec![&b"a"[..], b"b", b"c"]);
    }

    #[test]
    fn parse_u64_rejects_signs_spaces_and_overflow() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"1234"), Some(1234));
        assert_eq!(parse_u64(b"+1"), None);
        assert_eq!(parse_u64(b" 1"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"99999999999999999999"), None);
        assert_eq!(
            parse_u64(b"9999999999999999999"),
            Some(9_999_999_999_999_999_999)
        );
    }

    #[test]
    fn push_u64_writes_decimal() {
        for n in (0u64..=10_000).chain([99_999, 100_000, 1 << 32, u64::MAX / 10, u64::MAX]) {
            let mut b = Vec::new();
            push_u64(&mut b, n);
            assert_eq!(b, n.to_string().into_bytes());
        }
    }
}
