//! What comes back from the upstream: which kind of response it is, how
//! its body is framed, whether the connection can carry another request,
//! and the head the client sees.

use super::redirect::{rewrite_location, rewrite_refresh, RedirectRule};
use super::{connection_names_fields, is_field_value, is_hop_by_hop, is_token, named_by_connection};
use crate::response::ResponseError;
use crate::{eq_ignore_case, parse_u64, trim, Framing, ResponseHead, Version};
use std::time::Duration;

/// What the proxy did with the request it sent, as far as reading the
/// response depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentRequest {
    /// The method was HEAD: no body follows whatever the fields say.
    pub head: bool,
    /// An `Upgrade` was forwarded: a 101 is expected and means a tunnel.
    pub upgrade: bool,
    /// The client itself asked for `100-continue` (not just the proxy).
    pub client_expects_continue: bool,
    /// The client's version: no 1xx goes to an HTTP/1.0 client.
    pub client_version: Version,
}

/// What a response head is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseKind {
    /// A 1xx other than 101, to pass to the client (`forward`) or drop;
    /// the final response follows on the same connection (RFC 9110 §15.2).
    Interim { forward: bool },
    /// 101 to a forwarded upgrade: copy bytes both ways from here on.
    Tunnel,
    /// The final response.
    Final,
}

/// `Keep-Alive: timeout=N, max=M` (RFC 2068 §19.7.1.1, still sent by
/// Apache, Node, Tomcat and many others).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeepAlive {
    /// Seconds the upstream keeps an idle connection open.
    pub timeout: Option<u64>,
    /// Requests it will still take on this connection.
    pub max: Option<u64>,
}

/// The proxy's reading of a response head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseInfo {
    pub kind: ResponseKind,
    /// How the body is delimited (RFC 9112 §6.3): what to read from the
    /// upstream. The client's framing is the server side's decision.
    pub framing: Framing,
    /// The upstream lets the connection carry another request after this
    /// response (RFC 9112 §9.3), all else going well; see
    /// [`ResponseInfo::reusable`].
    pub keep_alive: bool,
    pub keep_alive_params: KeepAlive,
}

/// Why a response cannot be passed on (502 for the client, and the
/// upstream connection is closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamError {
    /// The framing fields contradict each other (differing lengths).
    Framing(ResponseError),
    /// A 101 to a request that asked for no upgrade: the bytes after it are
    /// in a protocol the proxy never agreed to.
    UnsolicitedSwitch,
    /// A field the client must not receive (CR/LF/NUL in a value, a name
    /// that is not a token).
    Field,
}

impl ResponseInfo {
    /// Whether the connection goes back to the stash after this exchange
    /// (RFC 9112 §9.3, §9.6): the upstream allows it, every byte of the
    /// request body went out, the whole response body came in, and
    /// nothing came after it. A byte past the end of a response means the
    /// two sides disagree about framing (a desynchronized or smuggled
    /// response), and the next request would read it as its answer.
    pub fn reusable(&self, request_body_sent: bool, response_done: bool, leftover: usize) -> bool {
        self.kind == ResponseKind::Final
            && self.keep_alive
            && request_body_sent
            && response_done
            && leftover == 0
    }
}

/// Parses a `Keep-Alive` value. Unknown parameters are ignored, as are
/// values that are not numbers; `;` is accepted as a separator too.
pub fn parse_keep_alive(value: &[u8]) -> KeepAlive {
    let mut ka = KeepAlive::default();
    for item in value.split(|&b| b == b',' || b == b';') {
        let Some(eq) = item.iter().position(|&b| b == b'=') else {
            continue;
        };
        let name = trim(&item[..eq]);
        let mut v = trim(&item[eq + 1..]);
        if let [b'"', inner @ .., b'"'] = v {
            v = inner;
        }
        if eq_ignore_case(name, b"timeout") {
            ka.timeout = parse_u64(v);
        } else if eq_ignore_case(name, b"max") {
            ka.max = parse_u64(v);
        }
    }
    ka
}

/// Reads a parsed response head in the light of the request it answers.
pub fn inspect_response(head: &ResponseHead, req: &SentRequest) -> Result<ResponseInfo, UpstreamError> {
    let params = head
        .headers()
        .filter(|(n, _)| eq_ignore_case(n, b"keep-alive"))
        .fold(KeepAlive::default(), |acc, (_, v)| {
            let k = parse_keep_alive(v);
            KeepAlive {
                timeout: k.timeout.or(acc.timeout),
                max: k.max.or(acc.max),
            }
        });
    let status = head.status;
    if (100..200).contains(&status) {
        let kind = match status {
            101 if req.upgrade => ResponseKind::Tunnel,
            101 => return Err(UpstreamError::UnsolicitedSwitch),
            // RFC 9110 §15.2: a proxy forwards 1xx unless it asked for
            // it itself; an HTTP/1.0 client gets none. 100 is the
            // proxy's own when it added the Expect.
            100 => ResponseKind::Interim {
                forward: req.client_expects_continue && req.client_version == Version::Http11,
            },
            _ => ResponseKind::Interim {
                forward: req.client_version == Version::Http11,
            },
        };
        return Ok(ResponseInfo {
            kind,
            framing: Framing::None,
            keep_alive: false,
            keep_alive_params: params,
        });
    }
    let framing = head.framing(req.head).map_err(UpstreamError::Framing)?;
    let mut te = false;
    let mut cl = false;
    for (n, _) in head.headers() {
        te |= eq_ignore_case(n, b"transfer-encoding");
        cl |= eq_ignore_case(n, b"content-length");
    }
    // RFC 9112 §6.3 item 3: both framings at once "ought to be handled as
    // an error"; Transfer-Encoding from an HTTP/1.0 server is faulty
    // (§6.1). The body is read as Transfer-Encoding says and re-framed for
    // the client, but the connection is not trusted with another request:
    // the upstream may count the body the other way (response-side TE.CL).
    let suspect = (te && cl) || (te && head.version != Some(Version::Http11));
    let keep_alive = head.keep_alive()
        && framing != Framing::Close
        && !suspect
        && params.max != Some(0)
        && params.timeout != Some(0);
    Ok(ResponseInfo {
        kind: ResponseKind::Final,
        framing,
        keep_alive,
        keep_alive_params: params,
    })
}

/// How long a kept-alive upstream connection may sit idle: the proxy's
/// own limit, but shorter than the upstream's `Keep-Alive: timeout=N`,
/// with a margin (a second, or half of N when N is short), so that the
/// proxy stops using the connection before the upstream closes it. This
/// narrows the keep-alive race; the retry on a fresh connection closes it.
pub fn idle_timeout(own: Duration, upstream: &KeepAlive) -> Duration {
    match upstream.timeout {
        None => own,
        Some(n) => {
            let theirs = Duration::from_secs(n);
            let margin = (theirs / 2).min(Duration::from_secs(1));
            own.min(theirs - margin)
        }
    }
}

/// The response fields the client may see, in order: hop-by-hop fields,
/// fields named by `Connection`, and `Content-Length` (the client's
/// framing is the server side's: [`ResponseInfo::framing`]) left out.
/// Location rewriting and `Via` are [`write_response_headers`]'s.
pub fn response_headers(head: &ResponseHead) -> impl Iterator<Item = (&[u8], &[u8])> + Clone {
    let conn = connection_names_fields(head.headers());
    head.headers().filter(move |(n, _)| {
        !is_hop_by_hop(n)
            && !eq_ignore_case(n, b"content-length")
            && !(conn && named_by_connection(head.headers(), n))
    })
}

/// Options for [`write_response_headers`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ResponseOptions<'a> {
    /// Rewrite `Location`, `Content-Location` and `Refresh`.
    pub redirect: Option<&'a RedirectRule<'a>>,
    /// Append `Via: 1.x <pseudonym>` (the upstream's version).
    pub via: Option<&'a [u8]>,
    /// Keep the upstream's `Content-Length`: for a response to HEAD and a
    /// 304, where it describes the representation, not a body on the wire.
    pub keep_content_length: bool,
    /// Fields the server side writes itself (lowercase, e.g. `server`,
    /// `date`), so the client never gets two.
    pub drop: &'a [&'a str],
}

/// Appends the client-side header fields of an upstream response (no
/// status line, no framing field, no blank line: the server side adds
/// those). On error nothing is appended.
pub fn write_response_headers(
    out: &mut Vec<u8>,
    head: &ResponseHead,
    opts: &ResponseOptions<'_>,
) -> Result<(), UpstreamError> {
    let mark = out.len();
    let r = write_fields(out, head, opts);
    if r.is_err() {
        out.truncate(mark);
    }
    r
}

fn write_fields(out: &mut Vec<u8>, head: &ResponseHead, opts: &ResponseOptions<'_>) -> Result<(), UpstreamError> {
    let conn = connection_names_fields(head.headers());
    let mut vias = 0;
    for (n, v) in head.headers() {
        let content_length = eq_ignore_case(n, b"content-length");
        if is_hop_by_hop(n)
            || (content_length && !opts.keep_content_length)
            || opts.drop.iter().any(|d| eq_ignore_case(n, d.as_bytes()))
            || (conn && named_by_connection(head.headers(), n))
        {
            continue;
        }
        if !is_token(n) || !is_field_value(v) {
            return Err(UpstreamError::Field);
        }
        if eq_ignore_case(n, b"via") && opts.via.is_some() {
            // Joined with ours below, so the chain reads as one list.
            vias += 1;
            continue;
        }
        out.extend_from_slice(n);
        out.extend_from_slice(b": ");
        let rewritten = match opts.redirect {
            Some(rule) if eq_ignore_case(n, b"location") || eq_ignore_case(n, b"content-location") => {
                rewrite_location(v, rule, out)
            }
            Some(rule) if eq_ignore_case(n, b"refresh") => rewrite_refresh(v, rule, out),
            _ => false,
        };
        if !rewritten {
            out.extend_from_slice(v);
        }
        out.extend_from_slice(b"\r\n");
    }
    if let Some(p) = opts.via {
        if !is_token(p) {
            return Err(UpstreamError::Field);
        }
        out.extend_from_slice(b"Via: ");
        if vias > 0 {
            for v in head
                .headers()
                .filter(|(n, _)| eq_ignore_case(n, b"via"))
                .map(|(_, v)| v)
                .filter(|v| !v.is_empty())
            {
                out.extend_from_slice(v);
                out.extend_from_slice(b", ");
            }
        }
        out.extend_from_slice(match head.version {
            Some(Version::Http10) => b"1.0 ",
            _ => b"1.1 ",
        });
        out.extend_from_slice(p);
        out.extend_from_slice(b"\r\n");
    }
    Ok(())
}
