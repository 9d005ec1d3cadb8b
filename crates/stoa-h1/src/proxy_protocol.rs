//! The PROXY protocol, versions 1 and 2 (HAProxy's `proxy-protocol.txt`):
//! the header a load balancer sends ahead of a connection's first byte to
//! say whose connection it is.
//!
//! Sans-IO: [`parse`] looks at the bytes received so far and says how long
//! the header is, whether more are needed, or why they are not a header.
//! The caller reads exactly that many bytes off the socket (peeking first),
//! so what follows (an HTTP request, a TLS ClientHello) stays unread.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// What a header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// A proxied TCP connection: the client's address and the address it
    /// connected to (§2.1 `TCP4`/`TCP6`, §2.2 `PROXY` over `AF_INET`/`AF_INET6`).
    Proxied {
        source: SocketAddr,
        destination: SocketAddr,
    },
    /// The proxy's own connection (v2 `LOCAL`, a health check) or one whose
    /// addresses it does not carry (v1 `UNKNOWN`, v2 `AF_UNSPEC` or
    /// `AF_UNIX`): the connection's own addresses apply (§2.1, §2.2).
    Local,
}

/// Why the bytes are not a PROXY header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// They start with neither signature: no header was sent.
    Missing,
    /// A v1 line without its CRLF within 107 bytes (§2.1).
    TooLong,
    /// A v2 header longer than this parser takes ([`MAX_V2`]).
    V2TooLong,
    /// A signature followed by something the grammar does not allow.
    Malformed(&'static str),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Missing => f.write_str("no PROXY protocol header"),
            Error::TooLong => f.write_str("PROXY v1 line longer than 107 bytes"),
            Error::V2TooLong => write!(f, "PROXY v2 header longer than {MAX_V2} bytes"),
            Error::Malformed(what) => write!(f, "malformed PROXY header: {what}"),
        }
    }
}

impl std::error::Error for Error {}

/// The longest v1 line, CRLF included (§2.1: `PROXY UNKNOWN` followed by
/// two full IPv6 addresses and ports).
pub const MAX_V1: usize = 107;

/// The longest v2 header taken: the 16 fixed bytes and 4 KiB of addresses
/// and TLVs. The format allows 64 KiB; what HAProxy sends (the addresses,
/// ALPN, authority, unique id up to 128 bytes, SSL details) is far below
/// this, and a bound keeps a trusted proxy's mistake from holding memory.
pub const MAX_V2: usize = 16 + 4096;

/// The most bytes [`parse`] may need to see to decide.
pub const MAX_HEADER: usize = MAX_V2;

const V1_SIG: &[u8] = b"PROXY ";
const V2_SIG: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";

/// Parses a header from the start of `buf`: `Ok(Some((header, len)))`
/// when one is complete in its first `len` bytes, `Ok(None)` when `buf`
/// is a correct beginning that needs more bytes, an error otherwise.
pub fn parse(buf: &[u8]) -> Result<Option<(Header, usize)>, Error> {
    if starts(buf, V2_SIG) {
        return parse_v2(buf);
    }
    if starts(buf, V1_SIG) {
        return parse_v1(buf);
    }
    Err(Error::Missing)
}

/// Whether `buf` begins with `sig`, or is a beginning of it (undecided:
/// treated as a match until more bytes say otherwise).
fn starts(buf: &[u8], sig: &[u8]) -> bool {
    let n = buf.len().min(sig.len());
    buf[..n] == sig[..n]
}

fn parse_v1(buf: &[u8]) -> Result<Option<(Header, usize)>, Error> {
    let window = &buf[..buf.len().min(MAX_V1)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        return if buf.len() >= MAX_V1 {
            Err(Error::TooLong)
        } else {
            Ok(None)
        };
    };
    let len = lf + 1;
    let Some(line) = buf[..lf].strip_suffix(b"\r") else {
        return Err(Error::Malformed("v1 line not ended by CRLF"));
    };
    let line = std::str::from_utf8(&line[V1_SIG.len()..])
        .map_err(|_| Error::Malformed("v1 line not ASCII"))?;
    let mut parts = line.split(' ');
    let proto = parts.next().unwrap_or("");
    if proto == "UNKNOWN" {
        // §2.1: whatever follows UNKNOWN up to the CRLF is ignored.
        return Ok(Some((Header::Local, len)));
    }
    let v6 = match proto {
        "TCP4" => false,
        "TCP6" => true,
        _ => return Err(Error::Malformed("v1 protocol not TCP4, TCP6 or UNKNOWN")),
    };
    let mut field = || {
        parts
            .next()
            .ok_or(Error::Malformed("v1 line has too few fields"))
    };
    let (src, dst, sport, dport) = (field()?, field()?, field()?, field()?);
    if parts.next().is_some() {
        return Err(Error::Malformed("v1 line has too many fields"));
    }
    let ip = |s: &str| -> Result<IpAddr, Error> {
        let ip = if v6 {
            s.parse::<Ipv6Addr>().map(IpAddr::V6)
        } else {
            s.parse::<Ipv4Addr>().map(IpAddr::V4)
        };
        ip.map_err(|_| Error::Malformed("v1 address not of its protocol's family"))
    };
    let port = |s: &str| -> Result<u16, Error> {
        // §2.1: a decimal number 0-65535; no sign, no leading zero.
        let ok = !s.is_empty()
            && s.len() <= 5
            && s.bytes().all(|b| b.is_ascii_digit())
            && (s == "0" || !s.starts_with('0'));
        ok.then(|| s.parse::<u16>().ok())
            .flatten()
            .ok_or(Error::Malformed("v1 port not a number 0-65535"))
    };
    let source = SocketAddr::new(ip(src)?, port(sport)?);
    let destination = SocketAddr::new(ip(dst)?, port(dport)?);
    Ok(Some((
        Header::Proxied {
            source,
            destination,
        },
        len,
    )))
}

fn parse_v2(buf: &[u8]) -> Result<Option<(Header, usize)>, Error> {
    if buf.len() < 16 {
        return Ok(None);
    }
    let ver_cmd = buf[12];
    if ver_cmd >> 4 != 2 {
        return Err(Error::Malformed("v2 version not 2"));
    }
    let fam = buf[13];
    let rest = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    let len = 16 + rest;
    if len > MAX_V2 {
        return Err(Error::V2TooLong);
    }
    // The command and family are checked before the whole header is in,
    // so a bad one is refused without waiting for its length.
    let local = match ver_cmd & 0x0f {
        0x0 => true,
        0x1 => false,
        _ => return Err(Error::Malformed("v2 command not LOCAL or PROXY")),
    };
    let need = match fam {
        // AF_UNSPEC: no address block.
        0x00 => 0,
        // AF_INET / AF_INET6 over STREAM.
        0x11 => 12,
        0x21 => 36,
        // AF_UNIX over STREAM: two 108-byte paths; no IP to carry.
        0x31 => 216,
        _ if local => 0,
        _ => {
            return Err(Error::Malformed(
                "v2 family not a stream over IPv4, IPv6 or Unix",
            ))
        }
    };
    if rest < need {
        return Err(Error::Malformed("v2 length shorter than its addresses"));
    }
    if buf.len() < len {
        return Ok(None);
    }
    if local {
        // §2.2: LOCAL's addresses, if any, are skipped; so are TLVs.
        return Ok(Some((Header::Local, len)));
    }
    let a = &buf[16..16 + need];
    let header = match fam {
        0x11 => {
            let ip = |at: usize| IpAddr::from([a[at], a[at + 1], a[at + 2], a[at + 3]]);
            Header::Proxied {
                source: SocketAddr::new(ip(0), u16::from_be_bytes([a[8], a[9]])),
                destination: SocketAddr::new(ip(4), u16::from_be_bytes([a[10], a[11]])),
            }
        }
        0x21 => {
            let ip = |at: usize| {
                let mut o = [0u8; 16];
                o.copy_from_slice(&a[at..at + 16]);
                IpAddr::from(o)
            };
            Header::Proxied {
                source: SocketAddr::new(ip(0), u16::from_be_bytes([a[32], a[33]])),
                destination: SocketAddr::new(ip(16), u16::from_be_bytes([a[34], a[35]])),
            }
        }
        _ => Header::Local,
    };
    Ok(Some((header, len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxied(src: &str, dst: &str) -> Header {
        Header::Proxied {
            source: src.parse().expect("source"),
            destination: dst.parse().expect("destination"),
        }
    }

    /// A v2 header: signature, version/command, family, length, then
    /// `body` (addresses and TLVs).
    fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut v = V2_SIG.to_vec();
        v.push(0x20 | cmd);
        v.push(fam);
        v.extend_from_slice(&(body.len() as u16).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn v1_tcp4_gives_the_client_and_the_rest_stays_unread_proxy_protocol_2_1() {
        let mut b = b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n".to_vec();
        let n = b.len();
        b.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(
            parse(&b),
            Ok(Some((proxied("192.0.2.7:56324", "198.51.100.1:443"), n)))
        );
    }

    #[test]
    fn v1_tcp6_and_unknown_proxy_protocol_2_1() {
        let b = b"PROXY TCP6 2001:db8::7 2001:db8::1 65535 0\r\n";
        assert_eq!(
            parse(b),
            Ok(Some((
                proxied("[2001:db8::7]:65535", "[2001:db8::1]:0"),
                b.len()
            )))
        );
        // UNKNOWN: the rest of the line, whatever it is, is ignored.
        let b = b"PROXY UNKNOWN\r\n";
        assert_eq!(parse(b), Ok(Some((Header::Local, b.len()))));
        let b = b"PROXY UNKNOWN ffff:f...f ffff:f...f 65535 65535\r\n";
        assert_eq!(parse(b), Ok(Some((Header::Local, b.len()))));
    }

    #[test]
    fn v1_lines_off_the_grammar_are_refused_proxy_protocol_2_1() {
        for bad in [
            &b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\n"[..],
            b"PROXY TCP4 192.0.2.7 198.51.100.1 56324\r\n",
            b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443 9\r\n",
            b"PROXY TCP4  192.0.2.7 198.51.100.1 56324 443\r\n",
            b"PROXY TCP4 2001:db8::7 198.51.100.1 56324 443\r\n",
            b"PROXY TCP6 192.0.2.7 2001:db8::1 56324 443\r\n",
            b"PROXY TCP4 192.0.2.7 198.51.100.1 65536 443\r\n",
            b"PROXY TCP4 192.0.2.7 198.51.100.1 080 443\r\n",
            b"PROXY TCP4 192.0.2.7 198.51.100.1 +80 443\r\n",
            b"PROXY TCP4 192.0.2.07 198.51.100.1 80 443\r\n",
            b"PROXY UDP4 192.0.2.7 198.51.100.1 80 443\r\n",
            b"PROXY tcp4 192.0.2.7 198.51.100.1 80 443\r\n",
        ] {
            assert!(
                matches!(parse(bad), Err(Error::Malformed(_))),
                "{:?}: {:?}",
                String::from_utf8_lossy(bad),
                parse(bad)
            );
        }
    }

    #[test]
    fn v1_is_at_most_107_bytes_proxy_protocol_2_1() {
        // The longest legal line (the spec's own worst case) is exactly
        // 107 bytes.
        let max = format!(
            "PROXY UNKNOWN {a} {a} 65535 65535\r\n",
            a = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
        );
        assert_eq!(max.len(), MAX_V1);
        assert!(matches!(parse(max.as_bytes()), Ok(Some((_, MAX_V1)))));
        // 107 bytes without a line end: refused, not waited for.
        let long = format!("PROXY UNKNOWN {}", "x".repeat(200));
        assert_eq!(parse(&long.as_bytes()[..MAX_V1]), Err(Error::TooLong));
        assert_eq!(parse(&long.as_bytes()[..MAX_V1 - 1]), Ok(None));
        // A CRLF past byte 107 does not make it acceptable.
        let late = format!("PROXY UNKNOWN {}\r\n", "x".repeat(100));
        assert_eq!(parse(late.as_bytes()), Err(Error::TooLong));
    }

    #[test]
    fn every_prefix_of_a_header_asks_for_more_bytes() {
        let v1 = b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n".to_vec();
        let mut body = vec![192, 0, 2, 7, 198, 51, 100, 1, 0xdc, 0x04, 0x01, 0xbb];
        body.extend_from_slice(&[0x03, 0x00, 0x04, 1, 2, 3, 4]); // a CRC32C TLV
        let v2 = v2(1, 0x11, &body);
        for h in [v1, v2] {
            for cut in 0..h.len() {
                assert_eq!(parse(&h[..cut]), Ok(None), "cut at {cut}");
            }
            assert!(matches!(parse(&h), Ok(Some((Header::Proxied { .. }, n))) if n == h.len()));
        }
    }

    #[test]
    fn no_signature_is_a_missing_header() {
        for b in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"\x16\x03\x01\x02\x00",
            b"PROXX",
            b"\r\n\r\n\0\r\nQUIX",
        ] {
            assert_eq!(parse(b), Err(Error::Missing), "{b:?}");
        }
    }

    #[test]
    fn v2_proxy_over_ipv4_and_ipv6_with_tlvs_skipped_proxy_protocol_2_2() {
        let mut body = vec![192, 0, 2, 7, 198, 51, 100, 1, 0xdc, 0x04, 0x01, 0xbb];
        // PP2_TYPE_ALPN "h2" and PP2_TYPE_AUTHORITY "example.com".
        body.extend_from_slice(&[0x01, 0x00, 0x02, b'h', b'2']);
        body.extend_from_slice(&[0x02, 0x00, 0x0b]);
        body.extend_from_slice(b"example.com");
        let mut h = v2(1, 0x11, &body);
        let n = h.len();
        h.extend_from_slice(b"\x16\x03\x01"); // a ClientHello follows
        assert_eq!(
            parse(&h),
            Ok(Some((proxied("192.0.2.7:56324", "198.51.100.1:443"), n)))
        );

        let src: Ipv6Addr = "2001:db8::7".parse().expect("ip");
        let dst: Ipv6Addr = "2001:db8::1".parse().expect("ip");
        let mut body = src.octets().to_vec();
        body.extend_from_slice(&dst.octets());
        body.extend_from_slice(&[0xff, 0xff, 0x00, 0x50]);
        let h = v2(1, 0x21, &body);
        assert_eq!(
            parse(&h),
            Ok(Some((
                proxied("[2001:db8::7]:65535", "[2001:db8::1]:80"),
                h.len()
            )))
        );
    }

    #[test]
    fn v2_local_and_unspec_use_the_connections_own_addresses_proxy_protocol_2_2() {
        // LOCAL with IPv4 addresses and a TLV: all skipped.
        let h = v2(
            0,
            0x11,
            &[127, 0, 0, 1, 127, 0, 0, 1, 0, 1, 0, 2, 0x04, 0, 0],
        );
        assert_eq!(parse(&h), Ok(Some((Header::Local, h.len()))));
        let h = v2(0, 0x00, &[]);
        assert_eq!(parse(&h), Ok(Some((Header::Local, h.len()))));
        let h = v2(1, 0x00, &[]);
        assert_eq!(parse(&h), Ok(Some((Header::Local, h.len()))));
        // AF_UNIX: no IP address to carry.
        let h = v2(1, 0x31, &[0u8; 216]);
        assert_eq!(parse(&h), Ok(Some((Header::Local, h.len()))));
    }

    #[test]
    fn v2_refuses_bad_versions_commands_families_and_lengths_proxy_protocol_2_2() {
        let addr = [192, 0, 2, 7, 198, 51, 100, 1, 0, 80, 0, 80];
        let mut bad_version = v2(1, 0x11, &addr);
        bad_version[12] = 0x11;
        let bad_cmd = v2(2, 0x11, &addr);
        let dgram = v2(1, 0x12, &addr);
        let short = v2(1, 0x11, &addr[..8]);
        let short6 = v2(1, 0x21, &addr);
        for h in [bad_version, bad_cmd, dgram, short, short6] {
            assert!(matches!(parse(&h), Err(Error::Malformed(_))), "{h:?}");
        }
        // Refused from its 16 fixed bytes, before the rest arrives.
        let mut big = V2_SIG.to_vec();
        big.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert_eq!(parse(&big), Err(Error::V2TooLong));
    }
}
