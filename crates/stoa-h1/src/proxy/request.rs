//! The request head sent upstream, rebuilt from parts.
//!
//! The head is never the client's bytes passed through: the request line,
//! Host and the framing field are written by the proxy from its own
//! decisions, and the client's fields are copied one by one after
//! checks. So whatever framing trick a client tries (RFC 9112 §6.1, §6.3:
//! CL.TE, TE.CL, duplicate lengths, obs-fold), the upstream receives
//! exactly one framing field that matches the bytes that follow.

use super::forwarded::{push_forwarded_element, push_xff_node, Node};
use super::rules::FieldRules;
use super::{
    connection_names_fields, is_field_value, is_hop_by_hop, is_token, is_via_name,
    named_by_connection, push_field,
};
use crate::body::{push_chunk_header, CHUNK_END};
use crate::cidr::TrustedProxies;
use crate::{eq_ignore_case, list_items, push_u64, Framing, Version};
use std::net::SocketAddr;

/// How the proxy sends a request body upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyPlan {
    /// No body.
    None,
    /// Copy `n` bytes as they come, with `Content-Length: n`.
    Length(u64),
    /// Decode the client's chunks and send the data as chunks of the
    /// proxy's own (extensions and trailers dropped), with
    /// `Transfer-Encoding: chunked`.
    Rechunk,
    /// An HTTP/1.0 upstream knows no chunked coding (RFC 9112 §6.1): read
    /// the body whole first (bounded by the caller's limit), then send it
    /// with `Content-Length`.
    Buffer,
}

/// The framing field the upstream head declares ([`write_request_head`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamBody {
    None,
    Length(u64),
    Chunked,
}

/// Decides how a body with the client's `framing` reaches an upstream
/// speaking `upstream`.
pub fn body_plan(framing: Framing, upstream: Version) -> BodyPlan {
    match (framing, upstream) {
        (Framing::None, _) => BodyPlan::None,
        (Framing::Length(n), _) => BodyPlan::Length(n),
        (Framing::Chunked, Version::Http11) => BodyPlan::Rechunk,
        // A request is never close-delimited (RFC 9112 §6.3 item 6); were
        // one to arrive, only buffering gives it a length.
        (Framing::Chunked, Version::Http10) | (Framing::Close, _) => BodyPlan::Buffer,
    }
}

/// Appends one chunk carrying `data` (nothing for empty data: an empty
/// chunk would be the last one). The last chunk is
/// [`crate::body::LAST_CHUNK`].
pub fn push_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    push_chunk_header(out, data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(CHUNK_END);
}

/// The target with a route's prefix taken off (`strip_prefix = true`):
/// `/app/x?q` under `/app/` is `/x?q`. A prefix without a trailing slash
/// only matches whole segments (`/app` strips `/app/x` and `/app?q`, not
/// `/apple`). `None` when the target does not start with the prefix
/// (a percent-encoded spelling of it, say: the caller then sends the
/// normalized path it routed on). The result may be empty or start with
/// `?`; [`write_request_head`] sends those as `/…`.
pub fn strip_prefix<'t>(target: &'t [u8], prefix: &[u8]) -> Option<&'t [u8]> {
    let rest = target.strip_prefix(prefix)?;
    if prefix.ends_with(b"/") {
        // Keep the slash: `/app/x` -> `/x`.
        return target.get(prefix.len() - 1..);
    }
    match rest.first() {
        None | Some(b'/' | b'?') => Some(rest),
        Some(_) => None,
    }
}

/// The protocols a client asks to upgrade to: the `Upgrade` field when
/// `Connection` lists `upgrade` (RFC 9110 §7.8). An HTTP/1.0 request's
/// Upgrade is ignored, as §7.8 requires.
pub fn upgrade_protocols<'h>(
    version: Version,
    headers: impl Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
) -> Option<&'h [u8]> {
    if version != Version::Http11 {
        return None;
    }
    let asked = headers.clone().any(|(n, v)| {
        eq_ignore_case(n, b"connection") && list_items(v).any(|t| eq_ignore_case(t, b"upgrade"))
    });
    if !asked {
        return None;
    }
    headers
        .filter(|(n, _)| eq_ignore_case(n, b"upgrade"))
        .map(|(_, v)| v)
        .find(|v| !v.is_empty())
}

/// The client's request, as parts.
#[derive(Debug, Clone)]
pub struct ClientRequest<'a, H> {
    pub method: &'a str,
    /// The target to send, in origin-form (after [`strip_prefix`]).
    pub target: &'a [u8],
    /// The version the client spoke (for `Via`).
    pub version: Version,
    /// The client's fields, in order ([`crate::RequestHead::headers`]).
    pub headers: H,
    /// The host the client asked for ([`crate::RequestHead::host`]).
    pub host: Option<&'a [u8]>,
    /// The client's address: the trust decision and `for=`.
    pub peer: SocketAddr,
    /// The scheme the client used: `http` or `https`.
    pub scheme: &'a str,
    /// Send `Expect: 100-continue` (the client asked for it and the body
    /// has not been read yet).
    pub expect_continue: bool,
    /// Tunnel: the `Upgrade` value to forward ([`upgrade_protocols`]).
    pub upgrade: Option<&'a [u8]>,
}

/// A route's proxy settings, fixed for the life of a config.
#[derive(Debug, Clone)]
pub struct ForwardOptions<'a> {
    /// The upstream's version: HTTP/1.0 upstreams get no chunked body
    /// and an explicit `Connection: keep-alive`.
    pub version: Version,
    /// The upstream's authority (`127.0.0.1:8081`): its Host unless
    /// `preserve_host`, and for clients that sent none.
    pub upstream_host: &'a [u8],
    /// Send the client's Host unchanged.
    pub preserve_host: bool,
    /// Peers whose `Forwarded` / `X-Forwarded-*` are kept and appended to;
    /// from anyone else they are dropped, as they could be forged.
    pub trusted: &'a TrustedProxies,
    /// Add a `Forwarded` element (RFC 7239).
    pub forwarded: bool,
    /// Add `X-Forwarded-For`, `-Proto`, `-Host`.
    pub x_forwarded: bool,
    /// How the client is named in `for=` and `X-Forwarded-For`
    /// (default: its IP address).
    pub for_node: Option<Node<'a>>,
    /// The proxy's `by=` node, if any.
    pub by: Option<Node<'a>>,
    /// The pseudonym for `Via` (RFC 9110 §7.6.3), e.g. `stoa`; no Via
    /// added when `None`.
    pub via: Option<&'a [u8]>,
    /// Ask to keep the upstream connection open.
    pub keep_alive: bool,
    /// The prefix `strip_prefix` took off the path (`/app`): sent as
    /// `X-Forwarded-Prefix` with the other `X-Forwarded-*` fields.
    pub prefix: Option<&'a [u8]>,
    /// The route's `header_up` rules, and their values for this request
    /// (one per [`FieldRules::len`], empty: no field).
    pub rules: Option<(&'a FieldRules, &'a [Vec<u8>])>,
}

/// Why a head could not be forwarded. Each is the client's fault (400)
/// or the route's (502), never something to send on regardless.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardError {
    /// The method is not a token.
    Method,
    /// CONNECT asks the proxy itself for a tunnel to its target; an
    /// origin upstream would answer with a tunnel the proxy did not ask for.
    Connect,
    /// The target has spaces, controls or is not origin-form.
    Target,
    /// A field name that is not a token or a value with CR, LF, NUL or
    /// another control (RFC 9110 §5.5): header injection.
    Field,
    /// A chunked body for an HTTP/1.0 upstream: buffer it first
    /// ([`BodyPlan::Buffer`]).
    ChunkedToHttp10,
    /// An upgrade through an HTTP/1.0 upstream (RFC 9110 §7.8).
    UpgradeToHttp10,
}

impl ForwardError {
    /// The status for the client.
    pub fn status(self) -> u16 {
        match self {
            ForwardError::Method | ForwardError::Target | ForwardError::Field => 400,
            ForwardError::Connect => 405,
            ForwardError::ChunkedToHttp10 | ForwardError::UpgradeToHttp10 => 502,
        }
    }
}

/// Fields the writer emits itself, from its own decisions, whatever the
/// client sent.
fn rewritten_by_proxy(name: &[u8]) -> bool {
    match name.len() {
        3 => eq_ignore_case(name, b"via"),
        4 => eq_ignore_case(name, b"host"),
        6 => eq_ignore_case(name, b"expect"),
        9 => eq_ignore_case(name, b"forwarded"),
        14 => eq_ignore_case(name, b"content-length"),
        15 => eq_ignore_case(name, b"x-forwarded-for"),
        16 => eq_ignore_case(name, b"x-forwarded-host"),
        17 => eq_ignore_case(name, b"x-forwarded-proto"),
        18 => eq_ignore_case(name, b"x-forwarded-prefix"),
        _ => false,
    }
}

/// Appends `name: v1, v2` for the non-empty values, if any; whether it
/// did (the caller may append its own element and ends the line).
fn push_list<'v>(
    out: &mut Vec<u8>,
    name: &[u8],
    values: impl Iterator<Item = &'v [u8]>,
) -> Result<bool, ForwardError> {
    // One field, the values comma-joined (RFC 9110 §5.3 lets a list field
    // be combined): the upstream sees one line, in order.
    let mut first = true;
    for v in values.filter(|v| !v.is_empty()) {
        if !is_field_value(v) {
            return Err(ForwardError::Field);
        }
        if first {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
        } else {
            out.extend_from_slice(b", ");
        }
        out.extend_from_slice(v);
        first = false;
    }
    Ok(!first)
}

/// Appends the upstream request head (up to and including the blank
/// line) to `out`. On error nothing is appended.
pub fn write_request_head<'h, H>(
    out: &mut Vec<u8>,
    req: &ClientRequest<'_, H>,
    opts: &ForwardOptions<'_>,
    body: UpstreamBody,
) -> Result<(), ForwardError>
where
    H: Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
{
    let mark = out.len();
    let r = write_head(out, req, opts, body);
    if r.is_err() {
        out.truncate(mark);
    }
    r
}

fn write_head<'h, H>(
    out: &mut Vec<u8>,
    req: &ClientRequest<'_, H>,
    opts: &ForwardOptions<'_>,
    body: UpstreamBody,
) -> Result<(), ForwardError>
where
    H: Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
{
    let m = req.method.as_bytes();
    if !is_token(m) {
        return Err(ForwardError::Method);
    }
    if m == b"CONNECT" {
        return Err(ForwardError::Connect);
    }
    if opts.version == Version::Http10 {
        if body == UpstreamBody::Chunked {
            return Err(ForwardError::ChunkedToHttp10);
        }
        if req.upgrade.is_some() {
            return Err(ForwardError::UpgradeToHttp10);
        }
    }
    // Origin-form or `*` (OPTIONS), no whitespace or controls: a space
    // would let the target carry a version and fields of its own.
    let t = req.target;
    if t.iter().any(|&b| b <= b' ' || b == 0x7f)
        || !(t.is_empty() || t[0] == b'/' || t[0] == b'?' || t == b"*")
    {
        return Err(ForwardError::Target);
    }
    out.extend_from_slice(m);
    out.push(b' ');
    if t.is_empty() || t[0] == b'?' {
        out.push(b'/');
    }
    out.extend_from_slice(t);
    out.push(b' ');
    out.extend_from_slice(opts.version.as_str().as_bytes());
    out.extend_from_slice(b"\r\n");

    let host = match req.host {
        Some(h) if opts.preserve_host && !h.is_empty() => h,
        _ => opts.upstream_host,
    };
    if !is_field_value(host) || host.is_empty() {
        return Err(ForwardError::Field);
    }
    push_field(out, b"Host", host);

    // Fields the Connection header names are hop-by-hop as well; looked
    // up per field only when Connection names any (rare).
    let conn_names = connection_names_fields(req.headers.clone());
    let hop =
        |n: &[u8]| is_hop_by_hop(n) || (conn_names && named_by_connection(req.headers.clone(), n));
    // A field a rule sets or removes is the route's: neither the client's
    // nor the proxy's own comes through.
    let ruled = |n: &[u8]| opts.rules.is_some_and(|(r, _)| r.drops(n));
    for (n, v) in req.headers.clone() {
        if hop(n) || rewritten_by_proxy(n) || ruled(n) {
            continue;
        }
        if !is_token(n) || !is_field_value(v) {
            return Err(ForwardError::Field);
        }
        push_field(out, n, v);
    }

    let trusted = opts.trusted.contains(req.peer.ip());
    let for_node = opts.for_node.unwrap_or(Node::Ip(req.peer.ip()));
    // The values of `name` the client sent that survive: all of them
    // from a trusted proxy, none otherwise.
    let incoming = |name: &'static [u8]| {
        req.headers
            .clone()
            .filter(move |(n, _)| eq_ignore_case(n, name))
            .map(|(_, v)| v)
            .filter(move |_| trusted && !hop(name) && !ruled(name))
    };
    // Forwarded (RFC 7239 §4): previous hops' elements, then ours.
    let had = push_list(out, b"Forwarded", incoming(b"forwarded"))?;
    if opts.forwarded && !ruled(b"forwarded") {
        out.extend_from_slice(if had { b", " } else { b"Forwarded: " });
        push_forwarded_element(out, &for_node, opts.by.as_ref(), req.host, Some(req.scheme));
    }
    if had || (opts.forwarded && !ruled(b"forwarded")) {
        out.extend_from_slice(b"\r\n");
    }

    let had = push_list(out, b"X-Forwarded-For", incoming(b"x-forwarded-for"))?;
    let ours = opts.x_forwarded && !ruled(b"x-forwarded-for");
    if ours {
        out.extend_from_slice(if had { b", " } else { b"X-Forwarded-For: " });
        push_xff_node(out, &for_node);
    }
    if had || ours {
        out.extend_from_slice(b"\r\n");
    }
    // Proto and Host describe the original client: a trusted proxy's
    // value stands, ours fills in when there is none.
    for (name, lower, ours) in [
        (
            &b"X-Forwarded-Proto"[..],
            &b"x-forwarded-proto"[..],
            Some(req.scheme.as_bytes()),
        ),
        (b"X-Forwarded-Host", b"x-forwarded-host", req.host),
    ] {
        let theirs = incoming(lower).find(|v| !v.is_empty());
        match (theirs, ours.filter(|_| opts.x_forwarded && !ruled(lower))) {
            (Some(v), _) | (None, Some(v)) if !v.is_empty() => {
                if !is_field_value(v) {
                    return Err(ForwardError::Field);
                }
                push_field(out, name, v);
            }
            _ => {}
        }
    }

    // The prefix the application's URLs need in front of them (Spring's
    // and Django's `X-Forwarded-Prefix`, Caddy and Traefik send it): a
    // trusted proxy's own prefix comes first, ours after it; a client's
    // is dropped with the other `X-Forwarded-*` it could forge.
    if let Some(p) = opts.prefix.filter(|_| opts.x_forwarded) {
        if !ruled(b"x-forwarded-prefix") && !p.is_empty() {
            let theirs = incoming(b"x-forwarded-prefix").find(|v| !v.is_empty());
            let theirs = theirs.map(|t| t.strip_suffix(b"/").unwrap_or(t));
            if !is_field_value(p) || theirs.is_some_and(|t| !is_field_value(t)) {
                return Err(ForwardError::Field);
            }
            out.extend_from_slice(b"X-Forwarded-Prefix: ");
            out.extend_from_slice(theirs.unwrap_or(b""));
            out.extend_from_slice(p);
            out.extend_from_slice(b"\r\n");
        }
    } else if let Some(v) = incoming(b"x-forwarded-prefix").find(|v| !v.is_empty()) {
        if !is_field_value(v) {
            return Err(ForwardError::Field);
        }
        push_field(out, b"X-Forwarded-Prefix", v);
    }

    // Via (RFC 9110 §7.6.3) is end-to-end: earlier hops stay, from anyone.
    let vias = req
        .headers
        .clone()
        .filter(|(n, _)| eq_ignore_case(n, b"via") && !hop(b"via") && !ruled(b"via"))
        .map(|(_, v)| v);
    let had = push_list(out, b"Via", vias)?;
    if let Some(p) = opts.via.filter(|_| !ruled(b"via")) {
        if !is_via_name(p) {
            return Err(ForwardError::Field);
        }
        out.extend_from_slice(if had { b", " } else { b"Via: " });
        out.extend_from_slice(match req.version {
            Version::Http10 => b"1.0 ",
            Version::Http11 => b"1.1 ",
        });
        out.extend_from_slice(p);
    }
    if had || opts.via.is_some_and(|_| !ruled(b"via")) {
        out.extend_from_slice(b"\r\n");
    }
    if let Some((rules, values)) = opts.rules {
        let value =
            |i: usize, b: &mut Vec<u8>| b.extend_from_slice(values.get(i).map_or(&b""[..], |v| v));
        if !rules.write(out, value) {
            return Err(ForwardError::Field);
        }
    }

    // 100-continue only makes sense with a body to hold back, and an
    // HTTP/1.0 server would not know it (RFC 9110 §10.1.1).
    if req.expect_continue && opts.version == Version::Http11 && body != UpstreamBody::None {
        push_field(out, b"Expect", b"100-continue");
    }
    match req.upgrade {
        Some(u) => {
            if !is_field_value(u) {
                return Err(ForwardError::Field);
            }
            push_field(out, b"Upgrade", u);
            push_field(out, b"Connection", b"upgrade");
        }
        None => match (opts.version, opts.keep_alive) {
            (Version::Http11, false) => push_field(out, b"Connection", b"close"),
            (Version::Http10, true) => push_field(out, b"Connection", b"keep-alive"),
            _ => {}
        },
    }
    match body {
        UpstreamBody::Length(n) => {
            out.extend_from_slice(b"Content-Length: ");
            push_u64(out, n);
            out.extend_from_slice(b"\r\n");
        }
        UpstreamBody::Chunked => push_field(out, b"Transfer-Encoding", b"chunked"),
        // RFC 9110 §8.6: a method that defines content says it has none,
        // so that no upstream waits for a body (or answers 411).
        UpstreamBody::None if matches!(m, b"POST" | b"PUT" | b"PATCH") => {
            push_field(out, b"Content-Length", b"0")
        }
        UpstreamBody::None => {}
    }
    out.extend_from_slice(b"\r\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{BodyDecoder, LAST_CHUNK};
    use crate::{ParseError, RequestHead, RequestLimits};

    const PEER: &str = "192.0.2.7:50000";

    fn opts(trusted: &TrustedProxies) -> ForwardOptions<'_> {
        ForwardOptions {
            version: Version::Http11,
            upstream_host: b"127.0.0.1:8081",
            preserve_host: false,
            trusted,
            forwarded: false,
            x_forwarded: false,
            for_node: None,
            by: None,
            via: None,
            keep_alive: true,
            prefix: None,
            rules: None,
        }
    }

    fn parse(raw: &[u8]) -> RequestHead {
        let mut h = RequestHead::default();
        match h.parse(raw, &RequestLimits::default()) {
            Ok(Some(_)) => h,
            other => panic!("not a complete head: {other:?}"),
        }
    }

    /// The upstream head for a raw client head, with `peer` as the client.
    fn forward_from(
        raw: &[u8],
        peer: &str,
        o: &ForwardOptions<'_>,
    ) -> Result<String, ForwardError> {
        let h = parse(raw);
        let body = match body_plan(h.framing, o.version) {
            BodyPlan::None => UpstreamBody::None,
            BodyPlan::Length(n) => UpstreamBody::Length(n),
            BodyPlan::Rechunk => UpstreamBody::Chunked,
            BodyPlan::Buffer => UpstreamBody::Length(3),
        };
        let req = ClientRequest {
            method: h.method.as_str(),
            target: h.original_target(),
            version: h.version,
            headers: h.headers(),
            host: h.host(),
            peer: peer.parse().expect("peer"),
            scheme: "http",
            expect_continue: h.expect_continue,
            upgrade: upgrade_protocols(h.version, h.headers()),
        };
        let mut out = Vec::new();
        write_request_head(&mut out, &req, o, body)?;
        Ok(String::from_utf8(out).expect("ascii head"))
    }

    fn forward(raw: &[u8], o: &ForwardOptions<'_>) -> String {
        forward_from(raw, PEER, o).expect("forwarded")
    }

    /// Field lines of a head (without the request line).
    fn fields(head: &str) -> Vec<&str> {
        head.split("\r\n")
            .skip(1)
            .filter(|l| !l.is_empty())
            .collect()
    }

    #[test]
    fn a_get_goes_upstream_with_its_fields_in_order_and_the_upstream_as_host_rfc9112_3_2() {
        let t = TrustedProxies::default();
        let out = forward(
            b"GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\nCookie: s=1\r\n\r\n",
            &opts(&t),
        );
        assert_eq!(
            out,
            "GET /a?b=1 HTTP/1.1\r\nHost: 127.0.0.1:8081\r\nAccept: */*\r\nCookie: s=1\r\n\r\n"
        );
    }

    #[test]
    fn the_clients_host_is_kept_when_preserved_and_the_upstreams_used_when_there_is_none() {
        let t = TrustedProxies::default();
        let o = ForwardOptions {
            preserve_host: true,
            ..opts(&t)
        };
        let out = forward(b"GET / HTTP/1.1\r\nHost: Example.com:8080\r\n\r\n", &o);
        assert!(
            out.starts_with("GET / HTTP/1.1\r\nHost: Example.com:8080\r\n"),
            "{out}"
        );
        // An absolute-form target's authority is the host (RFC 9112 §3.2.2).
        let out = forward(
            b"GET http://a.example/x HTTP/1.1\r\nHost: b.example\r\n\r\n",
            &o,
        );
        assert!(
            out.starts_with("GET /x HTTP/1.1\r\nHost: a.example\r\n"),
            "{out}"
        );
        assert_eq!(out.matches("Host:").count(), 1);
        // HTTP/1.0 without Host, and HTTP/1.1 with an empty one.
        let out = forward(b"GET / HTTP/1.0\r\n\r\n", &o);
        assert!(
            out.starts_with("GET / HTTP/1.1\r\nHost: 127.0.0.1:8081\r\n"),
            "{out}"
        );
        let out = forward(b"GET / HTTP/1.1\r\nHost:\r\n\r\n", &o);
        assert!(out.contains("Host: 127.0.0.1:8081\r\n"), "{out}");
    }

    #[test]
    fn hop_by_hop_fields_and_every_field_named_in_connection_are_removed_rfc9110_7_6_1() {
        let t = TrustedProxies::default();
        let out = forward(
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Secret, x-other\r\nKeep-Alive: timeout=5\r\n\
Proxy-Connection: keep-alive\r\nTE: trailers\r\nTrailer: X-T\r\nUpgrade: websocket\r\n\
Proxy-Authorization: Basic Zm9vOmJhcg==\r\nX-Secret: 1\r\nX-Other: 2\r\nX-Kept: 3\r\nConnection: x-late\r\nX-Late: 4\r\n\r\n",
            &opts(&t),
        );
        assert_eq!(fields(&out), vec!["Host: 127.0.0.1:8081", "X-Kept: 3"]);
    }

    #[test]
    fn connection_cannot_remove_the_fields_the_proxy_writes_itself() {
        // `Connection: Host, Content-Length` would leave an upstream
        // without a Host or a length for the body that follows.
        let t = TrustedProxies::default();
        let o = ForwardOptions {
            x_forwarded: true,
            ..opts(&t)
        };
        let out = forward(
            b"POST / HTTP/1.1\r\nHost: a\r\nConnection: Host, Content-Length, X-Forwarded-For\r\nContent-Length: 3\r\n\r\n",
            &o,
        );
        assert_eq!(
            fields(&out),
            vec![
                "Host: 127.0.0.1:8081",
                "X-Forwarded-For: 192.0.2.7",
                "X-Forwarded-Proto: http",
                "X-Forwarded-Host: a",
                "Content-Length: 3"
            ]
        );
    }

    #[test]
    fn forwarded_fields_from_an_untrusted_peer_are_replaced_not_believed_rfc7239_8_1() {
        let t = TrustedProxies::parse(["10.0.0.0/8"]).expect("nets");
        let o = ForwardOptions {
            forwarded: true,
            x_forwarded: true,
            ..opts(&t)
        };
        let out = forward(
            b"GET / HTTP/1.1\r\nHost: site.example\r\nForwarded: for=1.2.3.4\r\nX-Forwarded-For: 1.2.3.4\r\n\
X-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\nX-Real: 1\r\n\r\n",
            &o,
        );
        assert_eq!(
            fields(&out),
            vec![
                "Host: 127.0.0.1:8081",
                "X-Real: 1",
                "Forwarded: for=192.0.2.7;host=site.example;proto=http",
                "X-Forwarded-For: 192.0.2.7",
                "X-Forwarded-Proto: http",
                "X-Forwarded-Host: site.example",
            ]
        );
        // Not adding our own does not let theirs through either.
        let out = forward(b"GET / HTTP/1.1\r\nHost: a\r\nForwarded: for=1.2.3.4\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n", &opts(&t));
        assert_eq!(fields(&out), vec!["Host: 127.0.0.1:8081"]);
    }

    #[test]
    fn forwarded_fields_from_a_trusted_proxy_are_kept_and_appended_to_rfc7239_4() {
        let t = TrustedProxies::parse(["10.0.0.0/8", "::1"]).expect("nets");
        let o = ForwardOptions {
            forwarded: true,
            x_forwarded: true,
            by: Some(Node::Obfuscated("_stoa")),
            ..opts(&t)
        };
        let out = forward_from(
            b"GET / HTTP/1.1\r\nHost: site.example\r\nForwarded: for=198.51.100.1;proto=https\r\nX-Forwarded-For: 198.51.100.1\r\n\
Forwarded: for=\"[2001:db8::1]\"\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: www.example\r\n\r\n",
            "10.1.1.1:4000",
            &o,
        )
        .expect("forwarded");
        assert_eq!(
            fields(&out),
            vec![
                "Host: 127.0.0.1:8081",
                "Forwarded: for=198.51.100.1;proto=https, for=\"[2001:db8::1]\", for=10.1.1.1;by=_stoa;host=site.example;proto=http",
                "X-Forwarded-For: 198.51.100.1, 10.1.1.1",
                // The original client's scheme and host stand.
                "X-Forwarded-Proto: https",
                "X-Forwarded-Host: www.example",
            ]
        );
        // An IPv6 peer: quoted in brackets in Forwarded, bare in X-F-F.
        let out = forward_from(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", "[::1]:4000", &o)
            .expect("forwarded");
        assert!(
            out.contains("Forwarded: for=\"[::1]\";by=_stoa;host=a;proto=http\r\n"),
            "{out}"
        );
        assert!(out.contains("X-Forwarded-For: ::1\r\n"), "{out}");
    }

    #[test]
    fn a_hidden_client_is_named_by_its_obfuscated_identifier_rfc7239_6_3() {
        let t = TrustedProxies::default();
        let o = ForwardOptions {
            forwarded: true,
            for_node: Some(Node::Unknown),
            ..opts(&t)
        };
        let out = forward(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", &o);
        assert!(
            out.contains("Forwarded: for=unknown;host=a;proto=http\r\n"),
            "{out}"
        );
    }

    #[test]
    fn via_is_appended_with_the_protocol_the_proxy_received_rfc9110_7_6_3() {
        let t = TrustedProxies::default();
        let o = ForwardOptions {
            via: Some(b"stoa"),
            ..opts(&t)
        };
        let out = forward(
            b"GET / HTTP/1.1\r\nHost: a\r\nVia: 1.1 cdn\r\nVia: 1.0 fred\r\n\r\n",
            &o,
        );
        assert_eq!(
            fields(&out),
            vec!["Host: 127.0.0.1:8081", "Via: 1.1 cdn, 1.0 fred, 1.1 stoa"]
        );
        let out = forward(b"GET / HTTP/1.0\r\n\r\n", &o);
        assert!(out.contains("Via: 1.0 stoa\r\n"), "{out}");
        // Without our own, earlier hops still pass (Via is end-to-end).
        let out = forward(
            b"GET / HTTP/1.1\r\nHost: a\r\nVia: 1.1 cdn\r\n\r\n",
            &opts(&t),
        );
        assert!(out.contains("Via: 1.1 cdn\r\n"), "{out}");
    }

    #[test]
    fn a_content_length_body_keeps_its_length_and_a_chunked_one_is_rechunked_for_http11_rfc9112_6_1(
    ) {
        assert_eq!(
            body_plan(Framing::Length(5), Version::Http11),
            BodyPlan::Length(5)
        );
        assert_eq!(
            body_plan(Framing::Length(5), Version::Http10),
            BodyPlan::Length(5)
        );
        assert_eq!(
            body_plan(Framing::Chunked, Version::Http11),
            BodyPlan::Rechunk
        );
        assert_eq!(body_plan(Framing::None, Version::Http10), BodyPlan::None);
        let t = TrustedProxies::default();
        let out = forward(
            b"PUT /f HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
            &opts(&t),
        );
        assert!(out.ends_with("\r\nContent-Length: 5\r\n\r\n"), "{out}");
        let out = forward(
            b"PUT /f HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
            &opts(&t),
        );
        assert!(
            out.ends_with("\r\nTransfer-Encoding: chunked\r\n\r\n"),
            "{out}"
        );
        assert_eq!(out.matches("Content-Length").count(), 0);
    }

    #[test]
    fn a_chunked_body_for_an_http10_upstream_is_buffered_and_sent_with_its_length_rfc9112_6_1() {
        assert_eq!(
            body_plan(Framing::Chunked, Version::Http10),
            BodyPlan::Buffer
        );
        let t = TrustedProxies::default();
        let o = ForwardOptions {
            version: Version::Http10,
            ..opts(&t)
        };
        // forward_from() stands for the buffered body with a length of 3.
        let out = forward(
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
            &o,
        );
        assert_eq!(
            out,
            "POST / HTTP/1.0\r\nHost: 127.0.0.1:8081\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\n"
        );
        // Sending it chunked anyway is refused, never written.
        let mut out = b"kept".to_vec();
        let h = parse(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
        let req = ClientRequest {
            method: "POST",
            target: h.target(),
            version: h.version,
            headers: h.headers(),
            host: h.host(),
            peer: PEER.parse().expect("peer"),
            scheme: "http",
            expect_continue: false,
            upgrade: None,
        };
        assert_eq!(
            write_request_head(&mut out, &req, &o, UpstreamBody::Chunked),
            Err(ForwardError::ChunkedToHttp10)
        );
        assert_eq!(out, b"kept");
    }

    #[test]
    fn a_post_without_a_body_says_content_length_0_rfc9110_8_6() {
        let t = TrustedProxies::default();
        let out = forward(
            b"POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
            &opts(&t),
        );
        assert!(out.ends_with("\r\nContent-Length: 0\r\n\r\n"), "{out}");
        let out = forward(
            b"GET /f HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
            &opts(&t),
        );
        assert!(!out.contains("Content-Length"), "{out}");
    }

    #[test]
    fn the_connection_field_says_what_the_upstream_needs_to_know_rfc9112_9_3() {
        let t = TrustedProxies::default();
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
        // The client's close is about the client's connection.
        assert!(!forward(raw, &opts(&t)).contains("Connection"));
        let o = ForwardOptions {
            keep_alive: false,
            ..opts(&t)
        };
        assert!(forward(raw, &o).contains("\r\nConnection: close\r\n"));
        let o = ForwardOptions {
            version: Version::Http10,
            ..opts(&t)
        };
        assert!(forward(raw, &o).contains("\r\nConnection: keep-alive\r\n"));
        let o = ForwardOptions {
            version: Version::Http10,
            keep_alive: false,
            ..opts(&t)
        };
        assert!(!forward(raw, &o).contains("Connection"));
    }

    #[test]
    fn expect_100_continue_goes_only_to_an_http11_upstream_with_a_body_rfc9110_10_1_1() {
        let t = TrustedProxies::default();
        let raw = b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n";
        assert!(forward(raw, &opts(&t)).contains("\r\nExpect: 100-continue\r\n"));
        let o = ForwardOptions {
            version: Version::Http10,
            ..opts(&t)
        };
        assert!(!forward(raw, &o).contains("Expect"));
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n";
        assert!(!forward(raw, &opts(&t)).contains("Expect"));
    }

    #[test]
    fn upgrade_is_forwarded_only_for_a_tunnel_and_never_from_http10_rfc9110_7_8() {
        let t = TrustedProxies::default();
        let raw = b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
        assert_eq!(
            fields(&forward(raw, &opts(&t))),
            vec![
                "Host: 127.0.0.1:8081",
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                "Sec-WebSocket-Version: 13",
                "Upgrade: websocket",
                "Connection: upgrade"
            ]
        );
        // Upgrade without Connection: upgrade is no request to upgrade.
        let h = parse(b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n");
        assert_eq!(upgrade_protocols(h.version, h.headers()), None);
        let h = parse(b"GET / HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n");
        assert_eq!(upgrade_protocols(h.version, h.headers()), None);
        let o = ForwardOptions {
            version: Version::Http10,
            ..opts(&t)
        };
        assert_eq!(
            forward_from(raw, PEER, &o),
            Err(ForwardError::UpgradeToHttp10)
        );
    }

    #[test]
    fn connect_methods_and_bad_targets_are_refused() {
        let t = TrustedProxies::default();
        let o = opts(&t);
        let peer = PEER.parse().expect("peer");
        let h: [(&[u8], &[u8]); 0] = [];
        let req = |method, target| ClientRequest {
            method,
            target,
            version: Version::Http11,
            headers: h.iter().copied(),
            host: None,
            peer,
            scheme: "http",
            expect_continue: false,
            upgrade: None,
        };
        let mut out = Vec::new();
        let mut w = |method: &'static str, target: &'static [u8]| {
            write_request_head(&mut out, &req(method, target), &o, UpstreamBody::None)
        };
        assert_eq!(w("CONNECT", b"/"), Err(ForwardError::Connect));
        assert_eq!(ForwardError::Connect.status(), 405);
        assert_eq!(w("G T", b"/"), Err(ForwardError::Method));
        assert_eq!(w("", b"/"), Err(ForwardError::Method));
        for bad in [&b"/a b"[..], b"/a\r\nX: 1", b"/a\0", b"http://h/", b"a"] {
            assert_eq!(
                w("GET", bad),
                Err(ForwardError::Target),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(w("OPTIONS", b"*"), Ok(()));
        assert_eq!(w("GET", b"?q"), Ok(()));
        assert!(String::from_utf8_lossy(&out).contains("GET /?q HTTP/1.1\r\n"));
        assert!(out.starts_with(b"OPTIONS * HTTP/1.1\r\n"));
    }

    #[test]
    fn strip_prefix_keeps_the_slash_and_matches_whole_segments() {
        assert_eq!(strip_prefix(b"/app/x?q", b"/app/"), Some(&b"/x?q"[..]));
        assert_eq!(strip_prefix(b"/app/", b"/app/"), Some(&b"/"[..]));
        assert_eq!(strip_prefix(b"/app", b"/app/"), None);
        assert_eq!(strip_prefix(b"/app/x", b"/app"), Some(&b"/x"[..]));
        assert_eq!(strip_prefix(b"/app?q", b"/app"), Some(&b"?q"[..]));
        assert_eq!(strip_prefix(b"/app", b"/app"), Some(&b""[..]));
        assert_eq!(strip_prefix(b"/apple", b"/app"), None);
        assert_eq!(strip_prefix(b"/%61pp/x", b"/app/"), None);
    }

    // Request smuggling (RFC 9112 §11.2). The upstream must count the body
    // exactly as the proxy did, so the proxy's own parser refuses every
    // ambiguous head, and the forwarded head carries one framing field
    // written from the proxy's decision, never the client's bytes.

    #[test]
    fn cl_te_and_te_cl_heads_are_refused_before_they_can_be_forwarded_rfc9112_6_3() {
        let limits = RequestLimits::default();
        for raw in [
            // CL.TE: a front end that believes Content-Length, a back end
            // that believes chunked.
            &b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG"[..],
            // TE.CL: the other way round.
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
            // Duplicate, differing lengths (§6.3 item 5).
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            // Chunked not last: the body would run to the close (§6.3 item 4).
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
            // Chunked in HTTP/1.0 (§6.1).
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            let r = RequestHead::default().parse(raw, &limits);
            assert_eq!(r, Err(ParseError::BadFraming), "{:?}", String::from_utf8_lossy(raw));
        }
        // Obfuscated codings (`xchunked`, a space before the colon, obs-fold)
        // are refused too (501 / 400), never read as "not chunked".
        for raw in [
            &b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\nContent-Length: 3\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding:\r\n chunked\r\n\r\n",
        ] {
            assert!(
                matches!(
                    RequestHead::default().parse(raw, &limits),
                    Err(ParseError::UnknownCoding | ParseError::Malformed | ParseError::BadFraming)
                ),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn the_forwarded_head_has_exactly_one_framing_field_whatever_the_fields_say_rfc9112_6_3() {
        // Fields handed over by a caller that did not parse them (a future
        // HTTP/2 side, a subrequest): both framings, two lengths.
        let fields_in: [(&[u8], &[u8]); 5] = [
            (b"Host", b"a"),
            (b"Content-Length", b"6"),
            (b"Transfer-Encoding", b"chunked"),
            (b"content-length", b"99"),
            (b"X", b"1"),
        ];
        let t = TrustedProxies::default();
        for (body, framing) in [
            (UpstreamBody::Length(3), "Content-Length: 3"),
            (UpstreamBody::Chunked, "Transfer-Encoding: chunked"),
        ] {
            let req = ClientRequest {
                method: "POST",
                target: b"/",
                version: Version::Http11,
                headers: fields_in.iter().copied(),
                host: Some(b"a"),
                peer: PEER.parse().expect("peer"),
                scheme: "http",
                expect_continue: false,
                upgrade: None,
            };
            let mut out = Vec::new();
            write_request_head(&mut out, &req, &opts(&t), body).expect("forwarded");
            let out = String::from_utf8(out).expect("ascii");
            assert_eq!(fields(&out), vec!["Host: 127.0.0.1:8081", "X: 1", framing]);
        }
    }

    #[test]
    fn a_field_value_with_cr_lf_or_nul_is_refused_not_forwarded_rfc9110_5_5() {
        // Header injection: a value that ends a line for the upstream.
        let t = TrustedProxies::default();
        for bad in [
            (&b"X"[..], &b"1\r\nContent-Length: 0"[..]),
            (b"X", b"1\nTransfer-Encoding: chunked"),
            (b"X", b"a\0b"),
            (b"X Y", b"1"),
            (b"X:", b"1"),
            (b"", b"1"),
        ] {
            let h = [(&b"Host"[..], &b"a"[..]), bad];
            let req = ClientRequest {
                method: "GET",
                target: b"/",
                version: Version::Http11,
                headers: h.iter().copied(),
                host: Some(b"a"),
                peer: PEER.parse().expect("peer"),
                scheme: "http",
                expect_continue: false,
                upgrade: None,
            };
            let mut out = Vec::new();
            assert_eq!(
                write_request_head(&mut out, &req, &opts(&t), UpstreamBody::None),
                Err(ForwardError::Field),
                "{bad:?}"
            );
            assert!(out.is_empty());
        }
        // The parser already refuses obs-fold (RFC 9112 §5.2) and bare CR.
        let limits = RequestLimits::default();
        for raw in [
            &b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n folded\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\rY: 2\r\n\r\n",
        ] {
            assert!(RequestHead::default().parse(raw, &limits).is_err());
        }
    }

    #[test]
    fn a_te_cl_payload_inside_a_chunked_body_stays_body_when_rechunked_rfc9112_7_1() {
        // The client's chunked body, extensions and trailer included, is
        // decoded and sent as the proxy's own chunks: what follows the last
        // chunk is the client's next request (parsed and checked on its
        // own), never a request the upstream reads from this body.
        let body = b"5;ext=\"x\"\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n";
        let mut d = BodyDecoder::new(Framing::Chunked);
        let mut up = Vec::new();
        let mut at = 0;
        while !d.is_done() {
            let (n, data) = d.decode(&body[at..]).expect("valid chunks");
            push_chunk(&mut up, data);
            at += n;
            assert!(n > 0);
        }
        up.extend_from_slice(LAST_CHUNK);
        assert_eq!(up, b"5\r\nhello\r\n0\r\n\r\n");
        assert_eq!(&body[at..], b"GET /admin HTTP/1.1\r\nHost: a\r\n\r\n");
        // Chunk framing others read differently is refused outright: a
        // bare LF in the size line, a size past 2^63.
        for bad in [
            &b"5\nhello\r\n0\r\n\r\n"[..],
            b"5;a\nhello\r\n",
            b"8000000000000000\r\n",
        ] {
            let mut d = BodyDecoder::new(Framing::Chunked);
            assert!(d.decode(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// nginx `proxy_set_header X-Remote-User $remote_user` beside a
    /// client that sends its own `X-Remote-User`: only the route's value
    /// arrives; `remove` (Caddy `header_up -Cookie`) drops a field, and a
    /// `set` of `X-Forwarded-For` replaces the proxy's own.
    #[test]
    fn header_up_rules_replace_the_clients_fields_and_the_proxys_own() {
        let t = TrustedProxies::default();
        let rules = FieldRules::new(
            crate::proxy::Toward::Upstream,
            ["X-Remote-User", "X-Forwarded-For"],
            ["X-Tag"],
            ["Cookie"],
        )
        .unwrap();
        let values = [b"alice".to_vec(), b"10.9.9.9".to_vec(), b"t1".to_vec()];
        let o = ForwardOptions {
            x_forwarded: true,
            rules: Some((&rules, &values)),
            ..opts(&t)
        };
        let out = forward(
            b"GET / HTTP/1.1\r\nHost: a\r\nx-remote-user: root\r\nCookie: s=1\r\nX-Tag: mine\r\n\r\n",
            &o,
        );
        let f = fields(&out);
        assert!(f.contains(&"X-Remote-User: alice"), "{out}");
        assert!(!out.contains("root"), "{out}");
        assert!(!out.contains("Cookie"), "{out}");
        assert!(f.contains(&"X-Forwarded-For: 10.9.9.9"), "{out}");
        assert!(!out.contains("192.0.2.7"), "{out}");
        // `add` keeps the client's field and appends the route's.
        assert!(
            f.contains(&"X-Tag: mine") && f.contains(&"X-Tag: t1"),
            "{out}"
        );
        // An empty value removes the field: still never the client's.
        let values = [Vec::new(), Vec::new(), Vec::new()];
        let o = ForwardOptions {
            rules: Some((&rules, &values)),
            ..opts(&t)
        };
        let out = forward(
            b"GET / HTTP/1.1\r\nHost: a\r\nX-Remote-User: root\r\n\r\n",
            &o,
        );
        assert!(!out.to_ascii_lowercase().contains("x-remote-user"), "{out}");
    }

    /// `X-Forwarded-Prefix` (sent by Caddy's and Traefik's strip-prefix
    /// handlers, read by Spring and Django): the route's stripped prefix;
    /// a client's own is dropped unless it is a trusted proxy, whose
    /// prefix then comes first.
    #[test]
    fn x_forwarded_prefix_names_the_stripped_prefix_and_is_never_the_clients() {
        let t = TrustedProxies::parse(["10.0.0.0/8"]).unwrap();
        let o = ForwardOptions {
            x_forwarded: true,
            prefix: Some(b"/app"),
            ..opts(&t)
        };
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-Prefix: /evil\r\n\r\n";
        let out = forward(raw, &o);
        assert!(fields(&out).contains(&"X-Forwarded-Prefix: /app"), "{out}");
        assert!(!out.contains("evil"), "{out}");
        let out = forward_from(raw, "10.1.2.3:1000", &o).unwrap();
        assert!(
            fields(&out).contains(&"X-Forwarded-Prefix: /evil/app"),
            "{out}"
        );
        // Without `strip_prefix`, an untrusted client's is still dropped.
        let o = ForwardOptions {
            x_forwarded: true,
            ..opts(&t)
        };
        assert!(!forward(raw, &o).contains("Prefix"));
        let out = forward_from(raw, "10.1.2.3:1000", &o).unwrap();
        assert!(fields(&out).contains(&"X-Forwarded-Prefix: /evil"), "{out}");
        // Without `x_forwarded`, none of ours.
        let o = ForwardOptions {
            prefix: Some(b"/app"),
            ..opts(&t)
        };
        assert!(!forward(raw, &o).contains("Prefix"));
    }
}
