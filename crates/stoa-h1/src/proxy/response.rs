//! What comes back from the upstream: which kind of response it is, how
//! its body is framed, whether the connection can carry another request,
//! and the head the client sees.

use super::redirect::{rewrite_location, rewrite_refresh, RedirectRule};
use super::rules::FieldRules;
use super::{
    connection_names_fields, is_field_value, is_hop_by_hop, is_token, is_via_name,
    named_by_connection,
};
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
pub fn inspect_response(
    head: &ResponseHead,
    req: &SentRequest,
) -> Result<ResponseInfo, UpstreamError> {
    // One pass over the fields gathers everything below (dispatching on
    // the name's length, as `is_hop_by_hop` does): four scans before, a
    // quarter of reading a response head's fields (callgrind).
    let mut params = KeepAlive::default();
    let (mut close, mut keep) = (false, false);
    let mut chunked = None;
    let mut length: Option<u64> = None;
    let mut bad_length = false;
    let (mut te, mut cl) = (false, false);
    for (name, value) in head.headers() {
        match name.len() {
            10 if eq_ignore_case(name, b"keep-alive") => {
                // A later field's parameters win over an earlier one's.
                let k = parse_keep_alive(value);
                params = KeepAlive {
                    timeout: k.timeout.or(params.timeout),
                    max: k.max.or(params.max),
                };
            }
            10 if eq_ignore_case(name, b"connection") => {
                for t in crate::list_items(value) {
                    close |= eq_ignore_case(t, b"close");
                    keep |= eq_ignore_case(t, b"keep-alive");
                }
            }
            14 if eq_ignore_case(name, b"content-length") => {
                cl = true;
                for item in value.split(|&b| b == b',') {
                    match parse_u64(trim(item)) {
                        Some(n) if length.is_none_or(|l| l == n) => length = Some(n),
                        _ => bad_length = true,
                    }
                }
            }
            17 if eq_ignore_case(name, b"transfer-encoding") => {
                te = true;
                // Chunked must be the final coding; otherwise the body runs
                // to the close (RFC 9112 §6.3 item 4, response side).
                chunked = Some(
                    crate::list_items(value)
                        .last()
                        .is_some_and(|c| eq_ignore_case(c, b"chunked")),
                );
            }
            _ => {}
        }
    }
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
    // As `ResponseHead::framing` reads them (RFC 9112 §6.3).
    let framing = if crate::response::bodyless(req.head, status) {
        Framing::None
    } else if bad_length {
        return Err(UpstreamError::Framing(ResponseError::BadFraming));
    } else {
        match (chunked, length) {
            (Some(true), _) => Framing::Chunked,
            (Some(false), _) => Framing::Close,
            (None, Some(0)) => Framing::None,
            (None, Some(n)) => Framing::Length(n),
            (None, None) => Framing::Close,
        }
    };
    // As `ResponseHead::keep_alive` reads them (RFC 9112 §9.3).
    let upstream_keeps = match head.version {
        Some(Version::Http11) => !close,
        _ => keep && !close,
    };
    // RFC 9112 §6.3 item 3: both framings at once "ought to be handled as
    // an error"; Transfer-Encoding from an HTTP/1.0 server is faulty
    // (§6.1). The body is read as Transfer-Encoding says and re-framed for
    // the client, but the connection is not trusted with another request:
    // the upstream may count the body the other way (response-side TE.CL).
    let suspect = te && (cl || head.version != Some(Version::Http11));
    let keep_alive = upstream_keeps
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
        let hop = is_hop_by_hop(n) || (conn && named_by_connection(head.headers(), n));
        !hop && !eq_ignore_case(n, b"content-length")
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
    /// The route's `header_down` rules and their values for this
    /// response (one per [`FieldRules::len`], empty: no field).
    pub rules: Option<(&'a FieldRules, &'a [Vec<u8>])>,
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

fn write_fields(
    out: &mut Vec<u8>,
    head: &ResponseHead,
    opts: &ResponseOptions<'_>,
) -> Result<(), UpstreamError> {
    let conn = connection_names_fields(head.headers());
    // `Connection: via` would make Via hop-by-hop: then none is kept.
    let mut vias = 0;
    for (n, v) in head.headers() {
        let content_length = eq_ignore_case(n, b"content-length");
        if is_hop_by_hop(n)
            || (content_length && !opts.keep_content_length)
            || opts.drop.iter().any(|d| eq_ignore_case(n, d.as_bytes()))
            || opts.rules.is_some_and(|(r, _)| r.drops(n))
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
            Some(rule)
                if eq_ignore_case(n, b"location") || eq_ignore_case(n, b"content-location") =>
            {
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
        if !is_via_name(p) {
            return Err(UpstreamError::Field);
        }
        out.extend_from_slice(b"Via: ");
        if vias > 0 {
            // Only the Via fields the first loop counted (none is named by
            // Connection, or it would not have been counted).
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
    if let Some((rules, values)) = opts.rules {
        let value =
            |i: usize, b: &mut Vec<u8>| b.extend_from_slice(values.get(i).map_or(&b""[..], |v| v));
        if !rules.write(out, value) {
            return Err(UpstreamError::Field);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GET: SentRequest = SentRequest {
        head: false,
        upgrade: false,
        client_expects_continue: false,
        client_version: Version::Http11,
    };

    fn head(raw: &[u8]) -> ResponseHead {
        let mut h = ResponseHead::default();
        match h.parse(raw, 8192) {
            Ok(Some(n)) if n == raw.len() => h,
            other => panic!("not a whole head: {other:?}"),
        }
    }

    fn info(raw: &[u8], req: &SentRequest) -> ResponseInfo {
        inspect_response(&head(raw), req).expect("a response to pass on")
    }

    #[test]
    fn keep_alive_parameters_are_parsed_loosely_rfc2068_19_7_1_1() {
        let k = parse_keep_alive(b"timeout=5, max=100");
        assert_eq!(
            k,
            KeepAlive {
                timeout: Some(5),
                max: Some(100)
            }
        );
        let k = parse_keep_alive(b"Timeout = \"15\"; MAX=2, foo=bar, junk");
        assert_eq!(
            k,
            KeepAlive {
                timeout: Some(15),
                max: Some(2)
            }
        );
        assert_eq!(parse_keep_alive(b"timeout=-1, max=x"), KeepAlive::default());
        let i = info(
            b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=20\r\nContent-Length: 2\r\n\r\n",
            &GET,
        );
        assert_eq!(i.keep_alive_params.timeout, Some(20));
        assert!(i.keep_alive);
    }

    #[test]
    fn the_idle_timeout_ends_before_the_upstreams_own() {
        let own = Duration::from_secs(60);
        assert_eq!(idle_timeout(own, &KeepAlive::default()), own);
        let ka = |t| KeepAlive {
            timeout: Some(t),
            max: None,
        };
        assert_eq!(idle_timeout(own, &ka(5)), Duration::from_secs(4));
        assert_eq!(idle_timeout(own, &ka(1)), Duration::from_millis(500));
        assert_eq!(idle_timeout(own, &ka(0)), Duration::ZERO);
        assert_eq!(
            idle_timeout(Duration::from_secs(2), &ka(300)),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn a_connection_is_reused_only_after_a_whole_exchange_the_upstream_allows_rfc9112_9_3() {
        let i = info(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", &GET);
        assert_eq!(i.framing, Framing::Length(2));
        assert!(i.reusable(true, true, 0));
        // An early response while the body is still going out.
        assert!(!i.reusable(false, true, 0));
        // The response not read to its end.
        assert!(!i.reusable(true, false, 0));
        // Bytes past the end of the response: the upstream frames
        // differently from us, and the next request would get them.
        assert!(!i.reusable(true, true, 1));
        for raw in [
            &b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n"[..],
            b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n",
            // Close-delimited: the end of the body is the end of the connection.
            b"HTTP/1.1 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nKeep-Alive: max=0\r\nContent-Length: 2\r\n\r\n",
        ] {
            let i = info(raw, &GET);
            assert!(
                !i.keep_alive && !i.reusable(true, true, 0),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
        let i = info(
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n",
            &GET,
        );
        assert!(i.reusable(true, true, 0));
    }

    #[test]
    fn a_response_with_both_framings_is_read_as_chunked_and_its_connection_closed_rfc9112_6_3() {
        // Response-side TE.CL: whichever way the upstream counted, the
        // proxy takes no second request over this connection.
        let i = info(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            &GET,
        );
        assert_eq!(i.framing, Framing::Chunked);
        assert!(!i.keep_alive);
        let i = info(
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n",
            &GET,
        );
        assert!(!i.keep_alive);
        let e = inspect_response(
            &head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n"),
            &GET,
        );
        assert_eq!(e, Err(UpstreamError::Framing(ResponseError::BadFraming)));
    }

    #[test]
    fn an_upstream_head_with_obs_fold_or_a_bare_cr_is_refused_rfc9112_5_2() {
        // Response splitting: a folded line or a lone CR would be a
        // different field for the client than for the proxy.
        for raw in [
            &b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nX: a\rSet-Cookie: s=1\r\nContent-Length: 0\r\n\r\n",
        ] {
            assert!(
                ResponseHead::default().parse(raw, 8192).is_err(),
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn bodyless_responses_have_no_body_whatever_they_say_rfc9112_6_3() {
        let head_req = SentRequest { head: true, ..GET };
        let i = info(
            b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n",
            &head_req,
        );
        assert_eq!(i.framing, Framing::None);
        assert!(i.keep_alive);
        for raw in [
            &b"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n"[..],
            b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            assert_eq!(info(raw, &GET).framing, Framing::None);
        }
    }

    #[test]
    fn a_100_continue_reaches_the_client_only_if_it_asked_for_one_rfc9110_15_2_1() {
        let raw = b"HTTP/1.1 100 Continue\r\n\r\n";
        let asked = SentRequest {
            client_expects_continue: true,
            ..GET
        };
        assert_eq!(
            info(raw, &asked).kind,
            ResponseKind::Interim { forward: true }
        );
        // The proxy's own Expect (a body it holds): its 100 is its own.
        assert_eq!(
            info(raw, &GET).kind,
            ResponseKind::Interim { forward: false }
        );
        let old = SentRequest {
            client_version: Version::Http10,
            ..asked
        };
        assert_eq!(
            info(raw, &old).kind,
            ResponseKind::Interim { forward: false }
        );
        // Other 1xx (103 Early Hints) go to HTTP/1.1 clients only (§15.2).
        let raw = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n";
        assert_eq!(
            info(raw, &GET).kind,
            ResponseKind::Interim { forward: true }
        );
        assert_eq!(
            info(
                raw,
                &SentRequest {
                    client_version: Version::Http10,
                    ..GET
                }
            )
            .kind,
            ResponseKind::Interim { forward: false }
        );
        let i = info(raw, &GET);
        assert!(
            !i.reusable(true, true, 0),
            "an interim response is not the end of an exchange"
        );
    }

    #[test]
    fn a_101_is_a_tunnel_only_when_an_upgrade_was_asked_for_rfc9110_15_2_2() {
        let raw = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
        let ws = SentRequest {
            upgrade: true,
            ..GET
        };
        let i = info(raw, &ws);
        assert_eq!(i.kind, ResponseKind::Tunnel);
        assert!(!i.reusable(true, true, 0));
        assert_eq!(
            inspect_response(&head(raw), &GET),
            Err(UpstreamError::UnsolicitedSwitch)
        );
        // A declined upgrade is an ordinary response.
        let i = info(
            b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\n\r\n",
            &ws,
        );
        assert_eq!(i.kind, ResponseKind::Final);
    }

    fn written(raw: &[u8], o: &ResponseOptions<'_>) -> String {
        let mut out = Vec::new();
        write_response_headers(&mut out, &head(raw), o).expect("written");
        String::from_utf8(out).expect("ascii")
    }

    #[test]
    fn the_client_sees_no_hop_by_hop_field_nor_any_field_named_in_connection_rfc9110_7_6_1() {
        let raw = b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Backend\r\nKeep-Alive: timeout=5\r\n\
Transfer-Encoding: chunked\r\nX-Backend: node-3\r\nUpgrade: h2c\r\nTrailer: X-T\r\nProxy-Authenticate: Basic\r\n\
Content-Type: text/plain\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n";
        assert_eq!(
            written(raw, &ResponseOptions::default()),
            "Content-Type: text/plain\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
        );
        let h = head(raw);
        let seen: Vec<_> = response_headers(&h).map(|(n, _)| n).collect();
        assert_eq!(
            seen,
            vec![&b"Content-Type"[..], b"Set-Cookie", b"Set-Cookie"]
        );
    }

    #[test]
    fn content_length_is_kept_only_where_it_describes_no_body_on_the_wire() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nETag: \"x\"\r\n\r\n";
        assert_eq!(written(raw, &ResponseOptions::default()), "ETag: \"x\"\r\n");
        let o = ResponseOptions {
            keep_content_length: true,
            ..Default::default()
        };
        assert_eq!(written(raw, &o), "Content-Length: 1000\r\nETag: \"x\"\r\n");
        let o = ResponseOptions {
            drop: &["etag"],
            ..Default::default()
        };
        assert_eq!(written(raw, &o), "");
    }

    #[test]
    fn location_content_location_and_refresh_are_rewritten_and_via_appended() {
        let rule = RedirectRule {
            upstream_host: b"127.0.0.1:8081",
            upstream_prefix: b"/",
            client_scheme: "https",
            client_host: b"example.com",
            client_prefix: b"/app/",
        };
        let o = ResponseOptions {
            redirect: Some(&rule),
            via: Some(b"stoa"),
            ..Default::default()
        };
        let raw = b"HTTP/1.0 302 Found\r\nLocation: http://127.0.0.1:8081/login\r\nContent-Location: /x\r\n\
Refresh: 3; url=/y\r\nLink: </z>\r\nVia: 1.1 tomcat\r\n\r\n";
        assert_eq!(
            written(raw, &o),
            "Location: https://example.com/app/login\r\nContent-Location: /app/x\r\nRefresh: 3; url=/app/y\r\n\
Link: </z>\r\nVia: 1.1 tomcat, 1.0 stoa\r\n"
        );
    }

    /// nginx `proxy_hide_header X-Powered-By` and Caddy `header_down`:
    /// the upstream's field is hidden or replaced; `add` appends.
    #[test]
    fn header_down_rules_hide_replace_and_add_fields_of_the_upstream() {
        let rules = FieldRules::new(
            super::super::Toward::Client,
            ["Cache-Control"],
            ["X-Served-By"],
            ["X-Powered-By"],
        )
        .unwrap();
        let values = [b"no-store".to_vec(), b"edge".to_vec()];
        let o = ResponseOptions {
            rules: Some((&rules, &values)),
            ..Default::default()
        };
        let raw = b"HTTP/1.1 200 OK\r\nX-Powered-By: PHP/8\r\ncache-control: public\r\nETag: \"x\"\r\n\r\n";
        assert_eq!(
            written(raw, &o),
            "ETag: \"x\"\r\nCache-Control: no-store\r\nX-Served-By: edge\r\n"
        );
    }
}
