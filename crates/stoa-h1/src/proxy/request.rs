//! The request head sent upstream, rebuilt from parts.
//!
//! The head is never the client's bytes passed through: the request line,
//! Host and the framing field are written by the proxy from its own
//! decisions, and the client's fields are copied one by one after
//! checks. So whatever framing trick a client tries (RFC 9112 §6.1, §6.3:
//! CL.TE, TE.CL, duplicate lengths, obs-fold), the upstream receives
//! exactly one framing field that matches the bytes that follow.

use super::cidr::TrustedProxies;
use super::forwarded::{push_forwarded_element, push_xff_node, Node};
use super::{
    connection_names_fields, is_field_value, is_hop_by_hop, is_token, named_by_connection,
    push_field,
};
use crate::body::{push_chunk_header, CHUNK_END};
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
    let hop = |n: &[u8]| {
        is_hop_by_hop(n) || (conn_names && named_by_connection(req.headers.clone(), n))
    };
    for (n, v) in req.headers.clone() {
        if hop(n) || rewritten_by_proxy(n) {
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
            .filter(move |_| trusted && !hop(name))
    };
    // Forwarded (RFC 7239 §4): previous hops' elements, then ours.
    let had = push_list(out, b"Forwarded", incoming(b"forwarded"))?;
    if opts.forwarded {
        out.extend_from_slice(if had { b", " } else { b"Forwarded: " });
        push_forwarded_element(out, &for_node, opts.by.as_ref(), req.host, Some(req.scheme));
    }
    if had || opts.forwarded {
        out.extend_from_slice(b"\r\n");
    }

    let had = push_list(out, b"X-Forwarded-For", incoming(b"x-forwarded-for"))?;
    if opts.x_forwarded {
        out.extend_from_slice(if had { b", " } else { b"X-Forwarded-For: " });
        push_xff_node(out, &for_node);
    }
    if had || opts.x_forwarded {
        out.extend_from_slice(b"\r\n");
    }
    // Proto and Host describe the original client: a trusted proxy's
    // value stands, ours fills in when there is none.
    for (name, lower, ours) in [
        (&b"X-Forwarded-Proto"[..], &b"x-forwarded-proto"[..], Some(req.scheme.as_bytes())),
        (b"X-Forwarded-Host", b"x-forwarded-host", req.host),
    ] {
        let theirs = incoming(lower).find(|v| !v.is_empty());
        match (theirs, ours.filter(|_| opts.x_forwarded)) {
            (Some(v), _) | (None, Some(v)) if !v.is_empty() => {
                if !is_field_value(v) {
                    return Err(ForwardError::Field);
                }
                push_field(out, name, v);
            }
            _ => {}
        }
    }

    // Via (RFC 9110 §7.6.3) is end-to-end: earlier hops stay, from anyone.
    let vias = req
        .headers
        .clone()
        .filter(|(n, _)| eq_ignore_case(n, b"via") && !hop(b"via"))
        .map(|(_, v)| v);
    let had = push_list(out, b"Via", vias)?;
    if let Some(p) = opts.via {
        if !is_token(p) {
            return Err(ForwardError::Field);
        }
        out.extend_from_slice(if had { b", " } else { b"Via: " });
        out.extend_from_slice(match req.version {
            Version::Http10 => b"1.0 ",
            Version::Http11 => b"1.1 ",
        });
        out.extend_from_slice(p);
    }
    if had || opts.via.is_some() {
        out.extend_from_slice(b"\r\n");
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
