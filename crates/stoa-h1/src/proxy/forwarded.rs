//! `Forwarded` elements (RFC 7239) and the addresses of `X-Forwarded-For`.

use crate::push_ipv4;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};

/// A node of a `Forwarded` element (RFC 7239 §6): who sent the request
/// (`for`) or who received it (`by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node<'a> {
    Ip(IpAddr),
    /// An address with its port (`for="192.0.2.43:47011"`).
    Socket(SocketAddr),
    /// An obfuscated identifier (§6.3): `_` followed by letters, digits,
    /// `.`, `_`, `-`, for a proxy that hides its clients' or its own
    /// addresses but still lets the upstream tell nodes apart. Anything
    /// else is written as `unknown`.
    Obfuscated(&'a str),
    /// `unknown` (§6.2): the sender is not known or not to be told.
    Unknown,
}

fn valid_obfuscated(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() > 1
        && b[0] == b'_'
        && b[1..]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-')
}

/// IPv4 mapped into IPv6 (a dual-stack socket's view of an IPv4 peer) is
/// written as the IPv4 address the peer really has.
fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Appends a node as a `Forwarded` parameter value: a bare token where
/// the grammar allows one, quoted where it contains `:` or brackets (an
/// IPv6 address always, any address with a port; RFC 7239 §4, §6).
fn push_node(out: &mut Vec<u8>, node: &Node<'_>) {
    // `write!` into a Vec<u8> cannot fail.
    let _ = match *node {
        Node::Ip(ip) => match unmap(ip) {
            IpAddr::V4(a) => {
                push_ipv4(out, a);
                Ok(())
            }
            IpAddr::V6(a) => write!(out, "\"[{a}]\""),
        },
        Node::Socket(sa) => match unmap(sa.ip()) {
            IpAddr::V4(a) => {
                out.push(b'"');
                push_ipv4(out, a);
                out.push(b':');
                crate::push_u64(out, u64::from(sa.port()));
                out.push(b'"');
                Ok(())
            }
            IpAddr::V6(a) => write!(out, "\"[{a}]:{}\"", sa.port()),
        },
        Node::Obfuscated(s) if valid_obfuscated(s) => write!(out, "{s}"),
        Node::Obfuscated(_) | Node::Unknown => write!(out, "unknown"),
    };
}

/// Appends `value` as a token when it is one, else as a quoted-string
/// (RFC 9110 §5.6.4). Returns false, writing nothing, when the value has
/// a byte a quoted-string cannot carry.
fn push_value(out: &mut Vec<u8>, value: &[u8]) -> bool {
    // One pass classifies the value: the worst class of its bytes decides
    // how it is written (three scans before; the host is written for
    // every proxied request).
    let class = value
        .iter()
        .fold(0u8, |c, &b| c.max(VALUE_CLASS[usize::from(b)]));
    match class {
        _ if value.is_empty() => out.extend_from_slice(b"\"\""),
        TOKEN => out.extend_from_slice(value),
        QUOTE => {
            out.reserve(value.len() + 2);
            out.push(b'"');
            out.extend_from_slice(value);
            out.push(b'"');
        }
        ESCAPE => {
            out.reserve(value.len() + 4);
            out.push(b'"');
            for &b in value {
                if b == b'"' || b == b'\\' {
                    out.push(b'\\');
                }
                out.push(b);
            }
            out.push(b'"');
        }
        _ => return false,
    }
    true
}

/// Byte classes for [`push_value`], in increasing need: a token byte, a
/// byte a quoted-string carries as is, one it escapes, one it cannot
/// carry (controls but HTAB, DEL).
const TOKEN: u8 = 0;
const QUOTE: u8 = 1;
const ESCAPE: u8 = 2;
static VALUE_CLASS: [u8; 256] = {
    let mut t = [3u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = if crate::TCHAR[i] {
            TOKEN
        } else if b == b'"' || b == b'\\' {
            ESCAPE
        } else if b == b'\t' || (b >= 0x20 && b != 0x7f) {
            QUOTE
        } else {
            3
        };
        i += 1;
    }
    t
};

/// Appends one `Forwarded` element: `for=…;by=…;host=…;proto=…`
/// (RFC 7239 §4). `host` is the Host the client sent (its original
/// authority, which the upstream loses when the proxy replaces Host);
/// `proto` the scheme the client used.
pub fn push_forwarded_element(
    out: &mut Vec<u8>,
    for_: &Node<'_>,
    by: Option<&Node<'_>>,
    host: Option<&[u8]>,
    proto: Option<&str>,
) {
    out.extend_from_slice(b"for=");
    push_node(out, for_);
    if let Some(by) = by {
        out.extend_from_slice(b";by=");
        push_node(out, by);
    }
    if let Some(h) = host.filter(|h| !h.is_empty()) {
        let mark = out.len();
        out.extend_from_slice(b";host=");
        if !push_value(out, h) {
            out.truncate(mark);
        }
    }
    if let Some(p) = proto {
        let mark = out.len();
        out.extend_from_slice(b";proto=");
        if !push_value(out, p.as_bytes()) {
            out.truncate(mark);
        }
    }
}

/// Appends the node's address as `X-Forwarded-For` spells it: the bare
/// address, IPv6 without brackets, no port (the de-facto form nginx's
/// `$proxy_add_x_forwarded_for` and most applications expect); `unknown`
/// when there is none to tell.
pub(crate) fn push_xff_node(out: &mut Vec<u8>, node: &Node<'_>) {
    let ip = match *node {
        Node::Ip(ip) => Some(ip),
        Node::Socket(sa) => Some(sa.ip()),
        Node::Obfuscated(s) if valid_obfuscated(s) => {
            out.extend_from_slice(s.as_bytes());
            return;
        }
        _ => None,
    };
    match ip.map(unmap) {
        Some(IpAddr::V4(a)) => push_ipv4(out, a),
        Some(ip) => {
            // `write!` into a Vec<u8> cannot fail.
            let _ = write!(out, "{ip}");
        }
        None => out.extend_from_slice(b"unknown"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn push_ipv4_writes_what_display_writes() {
        // Every octet value in every position.
        for o in 0..=255u8 {
            for a in [
                [o, 0, 0, 1],
                [10, o, 9, 255],
                [1, 2, o, 99],
                [100, 10, 1, o],
            ] {
                let ip = std::net::Ipv4Addr::from(a);
                let mut v = Vec::new();
                super::push_ipv4(&mut v, ip);
                assert_eq!(v, ip.to_string().into_bytes());
            }
        }
    }

    use super::*;

    #[test]
    fn values_that_are_not_tokens_are_quoted_with_escapes_rfc9110_5_6_4() {
        for (v, want) in [
            (&b"example.com"[..], &b"example.com"[..]),
            (b"127.0.0.1:8080", b"\"127.0.0.1:8080\""),
            (b"a\"b\\c", b"\"a\\\"b\\\\c\""),
            (b"\"", b"\"\\\"\""),
            (b"", b"\"\""),
        ] {
            let mut b = Vec::new();
            assert!(push_value(&mut b, v));
            assert_eq!(b, want, "{:?}", String::from_utf8_lossy(v));
        }
        let mut b = Vec::new();
        assert!(!push_value(&mut b, b"a\rb"));
        assert!(b.is_empty());
    }

    fn element(
        for_: Node<'_>,
        by: Option<Node<'_>>,
        host: Option<&[u8]>,
        proto: Option<&str>,
    ) -> String {
        let mut out = Vec::new();
        push_forwarded_element(&mut out, &for_, by.as_ref(), host, proto);
        String::from_utf8(out).expect("ascii")
    }

    #[test]
    fn an_ipv4_node_is_a_bare_token_rfc7239_4() {
        let ip = "192.0.2.60".parse().unwrap();
        assert_eq!(
            element(Node::Ip(ip), None, Some(b"example.com"), Some("http")),
            "for=192.0.2.60;host=example.com;proto=http"
        );
    }

    #[test]
    fn ipv6_nodes_and_ports_are_quoted_with_brackets_rfc7239_6() {
        let v6 = "2001:db8:cafe::17".parse().unwrap();
        assert_eq!(
            element(Node::Ip(v6), None, None, None),
            "for=\"[2001:db8:cafe::17]\""
        );
        let sa = "[2001:db8:cafe::17]:4711".parse().unwrap();
        assert_eq!(
            element(Node::Socket(sa), None, None, None),
            "for=\"[2001:db8:cafe::17]:4711\""
        );
        let sa = "192.0.2.43:47011".parse().unwrap();
        assert_eq!(
            element(Node::Socket(sa), None, None, None),
            "for=\"192.0.2.43:47011\""
        );
    }

    #[test]
    fn an_ipv4_mapped_peer_is_written_as_ipv4() {
        let ip = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(element(Node::Ip(ip), None, None, None), "for=192.0.2.1");
        let mut x = Vec::new();
        push_xff_node(&mut x, &Node::Ip(ip));
        assert_eq!(x, b"192.0.2.1");
    }

    #[test]
    fn obfuscated_and_unknown_nodes_are_tokens_rfc7239_6_2_6_3() {
        assert_eq!(
            element(Node::Unknown, Some(Node::Obfuscated("_stoa.1")), None, None),
            "for=unknown;by=_stoa.1"
        );
        assert_eq!(
            element(Node::Obfuscated("_hidden"), None, None, None),
            "for=_hidden"
        );
        // Not a valid obfnode: told as unknown, never as raw text.
        for bad in ["hidden", "_", "_a b", "_a\"b", "_a;by=evil"] {
            assert_eq!(
                element(Node::Obfuscated(bad), None, None, None),
                "for=unknown",
                "{bad}"
            );
        }
    }

    #[test]
    fn a_host_with_a_port_is_quoted_and_a_host_with_controls_is_left_out() {
        let ip = "192.0.2.1".parse().unwrap();
        assert_eq!(
            element(Node::Ip(ip), None, Some(b"example.com:8080"), Some("https")),
            "for=192.0.2.1;host=\"example.com:8080\";proto=https"
        );
        assert_eq!(
            element(Node::Ip(ip), None, Some(b"a\"b\\"), None),
            "for=192.0.2.1;host=\"a\\\"b\\\\\""
        );
        assert_eq!(
            element(Node::Ip(ip), None, Some(b"a\r\nb"), None),
            "for=192.0.2.1"
        );
    }

    #[test]
    fn x_forwarded_for_takes_the_bare_address() {
        let mut x = Vec::new();
        push_xff_node(&mut x, &Node::Socket("[2001:db8::1]:80".parse().unwrap()));
        x.push(b' ');
        push_xff_node(&mut x, &Node::Unknown);
        assert_eq!(x, b"2001:db8::1 unknown");
    }
}
