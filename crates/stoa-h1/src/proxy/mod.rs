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

mod forwarded;
mod redirect;
mod request;
mod response;
mod rules;

pub use crate::cidr::{Cidr, CidrError, TrustedProxies};
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
pub use rules::{FieldRules, Toward};

use crate::{eq_ignore_case, is_tchar, list_items};

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

fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// RFC 9110 §5.5: CR, LF and NUL never appear in a field value that is
/// forwarded (a bare CR or LF would end the field for some recipient and
/// start a new one for another: header injection and smuggling). Other
/// control characters but HTAB are refused too, as obs-text is not.
fn is_field_value(v: &[u8]) -> bool {
    // No early exit: the whole value is checked either way for a value
    // that passes (nearly all), and without one the loop vectorizes.
    v.iter()
        .fold(true, |ok, &b| ok & (b == b'\t' || (b >= 0x20 && b != 0x7f)))
}

/// RFC 9110 §7.6.3 `received-by`: a pseudonym or `host[:port]` (an
/// IPv6 literal in brackets), never a list or a comment.
fn is_via_name(s: &[u8]) -> bool {
    !s.is_empty()
        && s.iter()
            .all(|&b| is_tchar(b) || b == b':' || b == b'[' || b == b']')
}

fn push_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.reserve(name.len() + value.len() + 4);
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tchar_is_rfc9110_5_6_2s_set_exactly() {
        for b in 0..=255u8 {
            let want = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            assert_eq!(is_tchar(b), want, "{b:#x}");
        }
    }

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

    use crate::body::{BodyDecoder, LAST_CHUNK};
    use crate::{Framing, RequestHead, RequestLimits, ResponseHead, Version};

    /// What an upstream reads from `wire`: the head, the body, and the
    /// bytes left after that one request.
    fn upstream_reads(wire: &[u8]) -> (RequestHead, Vec<u8>, usize) {
        let mut h = RequestHead::default();
        let n = match h.parse(wire, &RequestLimits::default()) {
            Ok(Some(n)) => n,
            other => panic!(
                "the upstream cannot parse {:?}: {other:?}",
                String::from_utf8_lossy(wire)
            ),
        };
        let mut d = BodyDecoder::new(h.framing);
        let mut body = Vec::new();
        let mut at = n;
        while !d.is_done() {
            let (used, data) = d
                .decode(&wire[at..])
                .expect("the upstream decodes the body");
            assert!(used > 0, "the body the head announced is all there");
            body.extend_from_slice(data);
            at += used;
        }
        (h, body, wire.len() - at)
    }

    /// One client request through the proxy, in the order a proxy
    /// handler calls the module: parse, plan, head, body.
    fn proxy_request(
        client: &[u8],
        upstream: Version,
        trusted: &TrustedProxies,
    ) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let mut h = RequestHead::default();
        let n = match h.parse(client, &RequestLimits::default()) {
            Ok(Some(n)) => n,
            other => panic!("refused: {other:?}"),
        };
        // The client's body as the proxy decodes it; what follows is the
        // client's next request, none of the upstream's business.
        let mut d = BodyDecoder::new(h.framing);
        let mut body = Vec::new();
        let mut at = n;
        while !d.is_done() {
            let (used, data) = d.decode(&client[at..]).expect("client body");
            body.extend_from_slice(data);
            at += used;
        }
        let next = client[at..].to_vec();
        let plan = body_plan(h.framing, upstream);
        let declared = match plan {
            BodyPlan::None => UpstreamBody::None,
            BodyPlan::Length(n) => UpstreamBody::Length(n),
            BodyPlan::Rechunk => UpstreamBody::Chunked,
            BodyPlan::Buffer => UpstreamBody::Length(body.len() as u64),
        };
        let opts = ForwardOptions {
            version: upstream,
            upstream_host: b"10.0.0.2:8080",
            preserve_host: true,
            trusted,
            forwarded: true,
            x_forwarded: true,
            for_node: None,
            by: None,
            via: Some(b"stoa"),
            keep_alive: true,
            prefix: None,
            rules: None,
        };
        let req = ClientRequest {
            method: h.method.as_str(),
            target: h.original_target(),
            version: h.version,
            headers: h.headers(),
            host: h.host(),
            peer: "203.0.113.5:1234".parse().expect("peer"),
            scheme: "https",
            expect_continue: h.expect_continue,
            upgrade: upgrade_protocols(h.version, h.headers()),
        };
        let mut wire = Vec::new();
        write_request_head(&mut wire, &req, &opts, declared).expect("forwarded");
        match plan {
            BodyPlan::Rechunk => {
                // As the body arrives: in pieces of whatever size.
                for piece in body.chunks(3) {
                    push_chunk(&mut wire, piece);
                }
                wire.extend_from_slice(LAST_CHUNK);
            }
            _ => wire.extend_from_slice(&body),
        }
        (wire, body, next)
    }

    #[test]
    fn the_upstream_reads_exactly_the_request_the_proxy_parsed_and_nothing_more_rfc9112_6_3() {
        let trusted = TrustedProxies::default();
        let clients: &[&[u8]] = &[
            b"GET /a?q=1 HTTP/1.1\r\nHost: site\r\nAccept: */*\r\n\r\n",
            b"POST /f HTTP/1.1\r\nHost: site\r\nContent-Length: 3,3\r\nContent-Length: 3\r\n\r\nabc",
            b"POST /f HTTP/1.1\r\nHost: site\r\nTransfer-Encoding: Chunked\r\nConnection: te, x\r\nTE: trailers\r\nX: 1\r\n\r\n\
3;name=\"v\"\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nX-Sum: 1\r\n\r\n",
            // A smuggled request after the body stays with the client.
            b"POST /f HTTP/1.1\r\nHost: site\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: site\r\n\r\n",
            b"POST /f HTTP/1.1\r\nHost: site\r\nContent-Length: 2\r\n\r\nhiGET /admin HTTP/1.1\r\nHost: site\r\n\r\n",
            b"PUT http://other.example/x HTTP/1.1\r\nHost: site\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nz",
            b"GET / HTTP/1.0\r\nConnection: keep-alive\r\nKeep-Alive: 300\r\n\r\n",
            b"GET /ws HTTP/1.1\r\nHost: site\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
        ];
        for client in clients {
            for upstream in [Version::Http11, Version::Http10] {
                let h = {
                    let mut h = RequestHead::default();
                    let _ = h.parse(client, &RequestLimits::default());
                    h
                };
                if upstream == Version::Http10
                    && upgrade_protocols(h.version, h.headers()).is_some()
                {
                    continue; // refused: ForwardError::UpgradeToHttp10
                }
                let (wire, body, next) = proxy_request(client, upstream, &trusted);
                let (up, up_body, left) = upstream_reads(&wire);
                let what = String::from_utf8_lossy(&wire).into_owned();
                assert_eq!(left, 0, "the upstream would read a second request: {what}");
                assert_eq!(up_body, body, "{what}");
                assert_eq!(up.method, h.method, "{what}");
                assert_eq!(up.target(), h.original_target(), "{what}");
                assert_eq!(up.version, upstream, "{what}");
                assert_eq!(
                    up.host(),
                    h.host().or(Some(&b"10.0.0.2:8080"[..])),
                    "{what}"
                );
                let names: Vec<_> = up.headers().map(|(n, _)| n.to_ascii_lowercase()).collect();
                for n in &names {
                    // Only the hop-by-hop fields the proxy writes itself.
                    let own = matches!(
                        n.as_slice(),
                        b"transfer-encoding" | b"connection" | b"upgrade"
                    );
                    assert!(own || !is_hop_by_hop(n), "{what}");
                    assert_ne!(n.as_slice(), b"x", "named by Connection: {what}");
                    assert_ne!(n.as_slice(), b"te", "{what}");
                }
                let framing_fields = names
                    .iter()
                    .filter(|n| {
                        n.as_slice() == b"content-length" || n.as_slice() == b"transfer-encoding"
                    })
                    .count();
                assert!(framing_fields <= 1, "{what}");
                if upstream == Version::Http10 {
                    assert_ne!(up.framing, Framing::Chunked, "{what}");
                }
                if client.windows(6).any(|w| w == b"/admin") {
                    assert!(next.starts_with(b"GET /admin"), "{what}");
                    assert!(!what.contains("/admin"), "{what}");
                }
            }
        }
    }

    #[test]
    fn a_response_goes_to_the_client_filtered_and_the_connection_back_only_when_whole_rfc9112_9_3()
    {
        let sent = SentRequest {
            head: false,
            upgrade: false,
            client_expects_continue: false,
            client_version: Version::Http11,
        };
        let wire = b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Internal\r\nKeep-Alive: timeout=5, max=99\r\n\
X-Internal: secret\r\nTransfer-Encoding: chunked\r\nLocation: http://10.0.0.2:8080/next\r\n\r\n\
4\r\nbody\r\n0\r\n\r\n";
        let mut head = ResponseHead::default();
        let n = match head.parse(wire, 8192) {
            Ok(Some(n)) => n,
            other => panic!("{other:?}"),
        };
        let info = inspect_response(&head, &sent).expect("passed on");
        assert_eq!(info.kind, ResponseKind::Final);
        assert_eq!(info.framing, Framing::Chunked);
        assert_eq!(
            idle_timeout(std::time::Duration::from_secs(60), &info.keep_alive_params),
            std::time::Duration::from_secs(4)
        );
        let rule = RedirectRule {
            upstream_host: b"10.0.0.2:8080",
            upstream_prefix: b"/",
            client_scheme: "https",
            client_host: b"site",
            client_prefix: b"/app/",
        };
        let mut out = Vec::new();
        let opts = ResponseOptions {
            redirect: Some(&rule),
            via: Some(b"stoa"),
            ..Default::default()
        };
        write_response_headers(&mut out, &head, &opts).expect("written");
        assert_eq!(out, b"Location: https://site/app/next\r\nVia: 1.1 stoa\r\n");
        let mut d = BodyDecoder::new(info.framing);
        let mut at = n;
        let mut body = Vec::new();
        while !d.is_done() {
            let (used, data) = d.decode(&wire[at..]).expect("body");
            body.extend_from_slice(data);
            at += used;
        }
        assert_eq!(body, b"body");
        assert!(info.reusable(true, d.is_done(), wire.len() - at));
    }

    #[test]
    fn a_via_name_is_a_pseudonym_or_host_and_port_rfc9110_7_6_3() {
        for ok in ["stoa", "proxy.example:8080", "[::1]:80"] {
            assert!(is_via_name(ok.as_bytes()), "{ok}");
        }
        for bad in ["", "a b", "a,b", "a (c)", "a\r\n"] {
            assert!(!is_via_name(bad.as_bytes()), "{bad:?}");
        }
    }

    #[test]
    fn field_values_with_cr_lf_or_nul_are_not_values_rfc9110_5_5() {
        assert!(is_field_value(b"a b\tc \x80\xff"));
        for bad in [&b"a\rb"[..], b"a\nb", b"a\0b", b"\x7f", b"\x01"] {
            assert!(!is_field_value(bad));
        }
    }
}
