//! The reverse proxy's HTTP/1 client side, sans-IO: what goes to an
//! upstream server and what comes back from it, as byte-level decisions
//! the proxy handler applies with its sockets.
//!
//! A proxy handler uses it in this order (one exchange):
//!
//! 1. [`body_plan`] on the client's framing and the upstream's version:
//!    copy a Content-Length body, re-chunk a chunked one, or buffer it
//!    whole first for an HTTP/1.0 upstream.
//! 2. [`write_request_head`] into the connection's output buffer: request
//!    line, Host, the client's end-to-end fields, `Forwarded` /
//!    `X-Forwarded-*` / `Via`, and exactly one framing field of the
//!    proxy's own choosing. Body chunks go out through
//!    [`push_chunk`] / [`crate::body::LAST_CHUNK`].
//! 3. [`ResponseHead::parse`](crate::ResponseHead::parse) on what the
//!    upstream sends, then [`inspect_response`]: a 1xx to forward or
//!    swallow, a 101 that turns the exchange into a tunnel, or the final
//!    response with its framing and whether the upstream offers reuse.
//! 4. [`write_response_headers`] (or [`response_headers`] for handlers
//!    that set fields one by one) for the client: hop-by-hop fields
//!    removed, `Location` / `Content-Location` / `Refresh` rewritten by a
//!    [`RedirectRule`], `Via` appended.
//! 5. After the body: [`ResponseInfo::reusable`] decides whether the
//!    connection goes back to the stash, and [`idle_timeout`] for how long,
//!    honouring the upstream's `Keep-Alive: timeout=N`.
//!
//! Nothing here allocates except by growing the caller's `Vec<u8>`.

mod cidr;
mod forwarded;
mod redirect;
mod request;
mod response;

pub use cidr::{Cidr, CidrError, TrustedProxies};
pub use forwarded::{push_forwarded_element, Node};
pub use redirect::{rewrite_location, rewrite_refresh, RedirectRule};
pub use request::{
    body_plan, push_chunk, strip_prefix, upgrade_protocols, write_request_head, BodyPlan,
    ClientRequest, ForwardError, ForwardOptions, UpstreamBody,
};
pub use response::{
    idle_timeout, inspect_response, parse_keep_alive, response_headers, write_response_headers,
    KeepAlive, ResponseInfo, ResponseKind, ResponseOptions, SentRequest, UpstreamError,
};

use crate::{eq_ignore_case, list_items};

/// Fields that describe one connection and never cross a proxy (RFC 9110
/// §7.6.1; Keep-Alive and Proxy-Connection are the pre-1.1 spellings RFC
/// 9110 names; TE and Trailer per §10.1.4 and §6.6.2; Transfer-Encoding
/// because each hop frames the body itself (RFC 9112 §6.1); Upgrade
/// because it only means something together with this hop's Connection
/// (§7.8); the Proxy-Auth fields because they authenticate this hop).
pub fn is_hop_by_hop(name: &[u8]) -> bool {
    // Dispatch on length first: this runs for every field of every
    // proxied message.
    match name.len() {
        2 => eq_ignore_case(name, b"te"),
        7 => eq_ignore_case(name, b"trailer") || eq_ignore_case(name, b"upgrade"),
        10 => eq_ignore_case(name, b"connection") || eq_ignore_case(name, b"keep-alive"),
        16 => eq_ignore_case(name, b"proxy-connection"),
        17 => eq_ignore_case(name, b"transfer-encoding"),
        18 => eq_ignore_case(name, b"proxy-authenticate"),
        19 => eq_ignore_case(name, b"proxy-authorization"),
        _ => false,
    }
}

/// Whether the `Connection` fields among `headers` name any field beyond
/// the connection options and hop-by-hop fields removed anyway. Checked
/// once per message so that the common case (`keep-alive`, `close`,
/// `upgrade`) never rescans the fields for each one.
fn connection_names_fields<'h>(headers: impl Iterator<Item = (&'h [u8], &'h [u8])>) -> bool {
    headers
        .filter(|(n, _)| eq_ignore_case(n, b"connection"))
        .flat_map(|(_, v)| list_items(v))
        .any(|t| {
            !eq_ignore_case(t, b"close") && !eq_ignore_case(t, b"keep-alive") && !is_hop_by_hop(t)
        })
}

/// Whether `name` is listed in a `Connection` field among `headers`
/// (RFC 9110 §7.6.1: such fields are hop-by-hop too).
fn named_by_connection<'h>(
    mut headers: impl Iterator<Item = (&'h [u8], &'h [u8])>,
    name: &[u8],
) -> bool {
    headers.any(|(n, v)| {
        eq_ignore_case(n, b"connection") && list_items(v).any(|t| eq_ignore_case(t, name))
    })
}

/// RFC 9110 §5.6.2 `tchar`: what a field name, a method and a token are
/// made of.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// RFC 9110 §5.5: CR, LF and NUL never appear in a field value that is
/// forwarded (a bare CR or LF would end the field for some recipient and
/// start a new one for another: header injection and smuggling). Other
/// control characters but HTAB are refused too, as obs-text is not.
fn is_field_value(v: &[u8]) -> bool {
    v.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

fn push_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_fields_are_recognised_in_any_case_rfc9110_7_6_1() {
        for n in [
            "Connection",
            "keep-alive",
            "Proxy-Connection",
            "TE",
            "Trailer",
            "Transfer-Encoding",
            "UPGRADE",
            "Proxy-Authorization",
            "Proxy-Authenticate",
        ] {
            assert!(is_hop_by_hop(n.as_bytes()), "{n}");
        }
        for n in [
            "Content-Length",
            "Host",
            "Trailers",
            "Tes",
            "Authorization",
            "Via",
        ] {
            assert!(!is_hop_by_hop(n.as_bytes()), "{n}");
        }
    }

    #[test]
    fn only_connection_tokens_that_are_not_options_name_fields() {
        let h = |v: &'static [u8]| [(&b"Connection"[..], v)];
        assert!(!connection_names_fields(
            h(b"keep-alive, close").into_iter()
        ));
        assert!(!connection_names_fields(h(b"Upgrade, TE").into_iter()));
        assert!(connection_names_fields(h(b"close, X-Secret").into_iter()));
        assert!(named_by_connection(
            h(b"close, X-Secret").into_iter(),
            b"x-secret"
        ));
        assert!(!named_by_connection(
            h(b"close, X-Secret").into_iter(),
            b"x-secre"
        ));
    }

    #[test]
    fn field_values_with_cr_lf_or_nul_are_not_values_rfc9110_5_5() {
        assert!(is_field_value(b"a b\tc \x80\xff"));
        for bad in [&b"a\rb"[..], b"a\nb", b"a\0b", b"\x7f", b"\x01"] {
            assert!(!is_field_value(bad));
        }
    }
}
