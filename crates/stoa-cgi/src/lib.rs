//! Sans-IO CGI/1.1 (RFC 3875): what CGI, FastCGI and SCGI share.
//!
//! - [`meta_variables`] builds a script's environment (RFC 3875 §4.1) from a
//!   description of the request.
//! - [`parse_head`] parses the head a script writes (§6.2, §6.3) and
//!   [`ResponseHead::kind`] classifies it: document, local redirect (to be
//!   re-dispatched inside the server, §6.2.2) or client redirect.
//!
//! Nothing here touches processes or sockets: the same code serves a CGI
//! child's pipes and a FastCGI connection's records.

use std::net::IpAddr;
use stoa_h1::trim;

/// What the server knows about a request, decoded and resolved.
#[derive(Debug, Clone, Default)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The decoded URL path of the script (`/cgi-bin/env.sh`).
    pub script_name: &'a str,
    /// The decoded rest of the path after the script, or "".
    pub path_info: &'a str,
    /// The query string as sent, without `?`.
    pub query: &'a [u8],
    /// The request-target as sent (REQUEST_URI).
    pub request_uri: &'a [u8],
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub protocol: &'a str,
    pub server_software: &'a str,
    pub server_name: &'a str,
    pub server_port: u16,
    pub remote_addr: Option<IpAddr>,
    pub remote_port: u16,
    pub document_root: &'a str,
    /// The file the server runs (or has the interpreter run).
    pub script_filename: &'a str,
    pub https: bool,
    /// The exact body length; `None` for a request without a body.
    pub content_length: Option<u64>,
    /// Set only when the server (or an authorizer) authenticated the user.
    pub auth_type: Option<&'a str>,
    pub remote_user: Option<&'a str>,
    /// Pass the Authorization header as HTTP_AUTHORIZATION (off by default:
    /// credentials are the server's business, RFC 3875 §4.1.18).
    pub pass_authorization: bool,
}

/// An environment: name and value bytes, in a stable order.
pub type Env = Vec<(String, Vec<u8>)>;

/// Builds the meta-variables for `req` with the request's header fields
/// (name, value) in arrival order. The environment starts empty: nothing of
/// the server's own environment leaks in unless the caller appends it.
pub fn meta_variables<'h>(
    req: &Request<'_>,
    headers: impl IntoIterator<Item = (&'h [u8], &'h [u8])>,
) -> Env {
    let mut env: Env = Vec::with_capacity(32);
    let mut set = |k: &str, v: &[u8]| env.push((k.to_owned(), v.to_vec()));
    if let Some(a) = req.auth_type {
        set("AUTH_TYPE", a.as_bytes());
    }
    if let Some(n) = req.content_length {
        set("CONTENT_LENGTH", n.to_string().as_bytes());
    }
    set("GATEWAY_INTERFACE", b"CGI/1.1");
    if !req.path_info.is_empty() {
        set("PATH_INFO", req.path_info.as_bytes());
        // §4.1.6: the path info mapped through the document root.
        let mut t = req.document_root.trim_end_matches('/').as_bytes().to_vec();
        t.extend_from_slice(req.path_info.as_bytes());
        set("PATH_TRANSLATED", &t);
    }
    set("QUERY_STRING", req.query);
    if let Some(ip) = req.remote_addr {
        // An IPv4-mapped IPv6 peer is reported in its IPv4 form.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        set("REMOTE_ADDR", ip.to_string().as_bytes());
        set("REMOTE_PORT", req.remote_port.to_string().as_bytes());
    }
    if let Some(u) = req.remote_user {
        set("REMOTE_USER", u.as_bytes());
    }
    set("REQUEST_METHOD", req.method.as_bytes());
    set("SCRIPT_NAME", req.script_name.as_bytes());
    set("SERVER_NAME", req.server_name.as_bytes());
    set("SERVER_PORT", req.server_port.to_string().as_bytes());
    set("SERVER_PROTOCOL", req.protocol.as_bytes());
    set("SERVER_SOFTWARE", req.server_software.as_bytes());
    set("DOCUMENT_ROOT", req.document_root.as_bytes());
    set("SCRIPT_FILENAME", req.script_filename.as_bytes());
    set("REQUEST_URI", req.request_uri);
    // php-cgi refuses to run without it (its force-cgi-redirect check).
    set("REDIRECT_STATUS", b"200");
    if req.https {
        set("HTTPS", b"on");
        set("REQUEST_SCHEME", b"https");
    } else {
        set("REQUEST_SCHEME", b"http");
    }

    // Protocol-specific meta-variables (§4.1.18): HTTP_ + the field name.
    let fixed = env.len();
    for (name, value) in headers {
        let Some(var) = http_var_name(name, req.pass_authorization) else {
            continue;
        };
        if let Some(existing) = env[fixed..].iter_mut().find(|(k, _)| *k == var) {
            // Repeated fields are joined as one list (RFC 9110 §5.3).
            existing.1.extend_from_slice(b", ");
            existing.1.extend_from_slice(value);
        } else {
            env.push((var, value.to_vec()));
        }
    }
    env
}

/// `HTTP_` + the field name upper-cased with `-` as `_`, or `None` for fields
/// that must not reach a script.
fn http_var_name(name: &[u8], pass_authorization: bool) -> Option<String> {
    // CONTENT_LENGTH / CONTENT_TYPE have their own variables; Proxy would
    // become HTTP_PROXY, which libraries take as their proxy setting
    // (httpoxy, CVE-2016-5385); Authorization only when configured.
    if name.eq_ignore_ascii_case(b"content-length") || name.eq_ignore_ascii_case(b"proxy") {
        return None;
    }
    if name.eq_ignore_ascii_case(b"authorization") && !pass_authorization {
        return None;
    }
    if name.eq_ignore_ascii_case(b"content-type") {
        return Some("CONTENT_TYPE".to_owned());
    }
    // A field with `_` would collide with the `-` spelling of another field
    // (X-Real-IP vs X_Real_IP): drop it, as Apache and nginx do.
    if name.is_empty() || !name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-') {
        return None;
    }
    let mut v = String::with_capacity(5 + name.len());
    v.push_str("HTTP_");
    for &b in name {
        v.push(if b == b'-' {
            '_'
        } else {
            b.to_ascii_uppercase() as char
        });
    }
    Some(v)
}

/// Why a script's head is refused (502 for the client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadError {
    /// Larger than the limit before its end.
    TooLarge,
    /// A line that is not `name: value`, a bad Status, or no CGI field at all.
    Malformed(String),
}

/// A script's response head (RFC 3875 §6.2-6.3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseHead {
    /// From `Status: 404 Not Found`.
    pub status: Option<u16>,
    pub reason: Option<String>,
    pub location: Option<Vec<u8>>,
    pub content_type: Option<Vec<u8>>,
    pub content_length: Option<u64>,
    /// Every other field, in order. Hop-by-hop fields (Connection,
    /// Transfer-Encoding, Keep-Alive) and Date/Server are dropped: framing
    /// and those fields are the server's.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// What kind of response a head makes (§6.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind<'a> {
    Document,
    /// An abs-path (and query) to serve instead, inside the server (§6.2.2).
    LocalRedirect(&'a [u8]),
    /// A redirect the client follows; `status` is Status or 302 (§6.2.3-4).
    ClientRedirect,
}

impl ResponseHead {
    pub fn kind(&self) -> Kind<'_> {
        match &self.location {
            Some(loc) if loc.starts_with(b"/") && !loc.starts_with(b"//") => {
                // Only a bare Location is a local redirect; with a Status or
                // other fields it is a response for the client (PHP's
                // header("Location: /x") sends Status 302 and a type).
                if self.status.is_none() && self.content_type.is_none() && self.headers.is_empty() {
                    Kind::LocalRedirect(loc)
                } else {
                    Kind::ClientRedirect
                }
            }
            Some(_) => Kind::ClientRedirect,
            None => Kind::Document,
        }
    }

    /// The status the client gets.
    pub fn effective_status(&self) -> u16 {
        match (self.status, &self.location) {
            (Some(s), _) => s,
            (None, Some(_)) => 302,
            (None, None) => 200,
        }
    }
}

/// Most fields a script may send.
const MAX_FIELDS: usize = 100;

/// Parses a script's head from the start of `buf`. Lines end with LF or
/// CRLF; the head ends with an empty line. Returns `Ok(None)` when more
/// output is needed, or the head and the number of bytes it took.
pub fn parse_head(buf: &[u8], max: usize) -> Result<Option<(ResponseHead, usize)>, HeadError> {
    let mut head = ResponseHead::default();
    let mut pos = 0;
    let mut fields = 0;
    loop {
        let Some(nl) = buf[pos..].iter().position(|&b| b == b'\n') else {
            return if buf.len() > max {
                Err(HeadError::TooLarge)
            } else {
                Ok(None)
            };
        };
        let line_end = pos + nl;
        if line_end >= max {
            return Err(HeadError::TooLarge);
        }
        let mut line = &buf[pos..line_end];
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }
        pos = line_end + 1;
        if line.is_empty() {
            if fields == 0 {
                return Err(HeadError::Malformed(
                    "empty head: no Content-Type, Location or Status".into(),
                ));
            }
            return Ok(Some((head, pos)));
        }
        fields += 1;
        if fields > MAX_FIELDS {
            return Err(HeadError::TooLarge);
        }
        let colon = line.iter().position(|&b| b == b':').ok_or_else(|| {
            HeadError::Malformed(format!(
                "not a header line: {:?}",
                String::from_utf8_lossy(line)
            ))
        })?;
        let name = &line[..colon];
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            return Err(HeadError::Malformed(format!(
                "bad field name {:?}",
                String::from_utf8_lossy(name)
            )));
        }
        let value = trim(&line[colon + 1..]);
        if value.iter().any(|&b| b == 0 || b == b'\r') {
            return Err(HeadError::Malformed(
                "control character in a field value".into(),
            ));
        }
        let name_str = String::from_utf8_lossy(name).into_owned();
        if name.eq_ignore_ascii_case(b"status") {
            let (code, reason) = parse_status(value)?;
            head.status = Some(code);
            head.reason = reason;
        } else if name.eq_ignore_ascii_case(b"location") {
            if value.is_empty() {
                return Err(HeadError::Malformed("empty Location".into()));
            }
            head.location = Some(value.to_vec());
        } else if name.eq_ignore_ascii_case(b"content-type") {
            head.content_type = Some(value.to_vec());
        } else if name.eq_ignore_ascii_case(b"content-length") {
            let n = std::str::from_utf8(value)
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| HeadError::Malformed("bad Content-Length".into()))?;
            if head.content_length.is_some_and(|m| m != n) {
                return Err(HeadError::Malformed("conflicting Content-Length".into()));
            }
            head.content_length = Some(n);
        } else if [
            "connection",
            "transfer-encoding",
            "keep-alive",
            "date",
            "server",
        ]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h.as_bytes()))
        {
            // The server frames the response and dates it itself.
        } else {
            head.headers.push((name_str, value.to_vec()));
        }
    }
}

fn parse_status(v: &[u8]) -> Result<(u16, Option<String>), HeadError> {
    let bad = || HeadError::Malformed(format!("bad Status {:?}", String::from_utf8_lossy(v)));
    if v.len() < 3 || !v[..3].iter().all(u8::is_ascii_digit) || (v.len() > 3 && v[3] != b' ') {
        return Err(bad());
    }
    let code = u16::from(v[0] - b'0') * 100 + u16::from(v[1] - b'0') * 10 + u16::from(v[2] - b'0');
    if !(100..=599).contains(&code) {
        return Err(bad());
    }
    let reason = trim(&v[3..]);
    let reason = (!reason.is_empty()).then(|| String::from_utf8_lossy(reason).into_owned());
    Ok((code, reason))
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'e>(env: &'e Env, k: &str) -> Option<&'e [u8]> {
        env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_slice())
    }

    fn sample() -> Request<'static> {
        Request {
            method: "POST",
            script_name: "/cgi-bin/env",
            path_info: "/extra/path",
            query: b"a=1&b=%20",
            request_uri: b"/cgi-bin/env/extra/path?a=1&b=%20",
            protocol: "HTTP/1.1",
            server_software: "stoa/0.1",
            server_name: "example.com",
            server_port: 8080,
            remote_addr: Some("127.0.0.1".parse().unwrap()),
            remote_port: 40000,
            document_root: "/srv/www",
            script_filename: "/srv/cgi-bin/env",
            https: false,
            content_length: Some(5),
            auth_type: None,
            remote_user: None,
            pass_authorization: false,
        }
    }

    #[test]
    fn meta_variables_follow_rfc3875_4_1() {
        let hs: Vec<(&[u8], &[u8])> = vec![
            (b"Host", b"example.com:8080"),
            (b"Content-Type", b"application/x-www-form-urlencoded"),
            (b"Content-Length", b"5"),
            (b"User-Agent", b"t"),
            (b"Accept", b"a"),
            (b"accept", b"b"),
        ];
        let env = meta_variables(&sample(), hs);
        assert_eq!(get(&env, "GATEWAY_INTERFACE"), Some(&b"CGI/1.1"[..]));
        assert_eq!(get(&env, "REQUEST_METHOD"), Some(&b"POST"[..]));
        assert_eq!(get(&env, "SCRIPT_NAME"), Some(&b"/cgi-bin/env"[..]));
        assert_eq!(get(&env, "PATH_INFO"), Some(&b"/extra/path"[..]));
        assert_eq!(
            get(&env, "PATH_TRANSLATED"),
            Some(&b"/srv/www/extra/path"[..])
        );
        assert_eq!(get(&env, "QUERY_STRING"), Some(&b"a=1&b=%20"[..]));
        assert_eq!(get(&env, "CONTENT_LENGTH"), Some(&b"5"[..]));
        assert_eq!(
            get(&env, "CONTENT_TYPE"),
            Some(&b"application/x-www-form-urlencoded"[..])
        );
        assert_eq!(get(&env, "REMOTE_ADDR"), Some(&b"127.0.0.1"[..]));
        assert_eq!(get(&env, "REMOTE_PORT"), Some(&b"40000"[..]));
        assert_eq!(get(&env, "SERVER_NAME"), Some(&b"example.com"[..]));
        assert_eq!(get(&env, "SERVER_PORT"), Some(&b"8080"[..]));
        assert_eq!(get(&env, "SERVER_PROTOCOL"), Some(&b"HTTP/1.1"[..]));
        assert_eq!(get(&env, "REDIRECT_STATUS"), Some(&b"200"[..]));
        assert_eq!(get(&env, "HTTP_USER_AGENT"), Some(&b"t"[..]));
        assert_eq!(get(&env, "HTTP_ACCEPT"), Some(&b"a, b"[..]));
        assert_eq!(get(&env, "HTTP_CONTENT_LENGTH"), None);
        assert_eq!(get(&env, "AUTH_TYPE"), None);
        assert_eq!(get(&env, "REMOTE_USER"), None);
        assert_eq!(get(&env, "HTTPS"), None);
    }

    #[test]
    fn a_proxy_header_never_becomes_http_proxy_cve_2016_5385() {
        let env = meta_variables(&sample(), vec![(&b"Proxy"[..], &b"http://evil:1"[..])]);
        assert_eq!(get(&env, "HTTP_PROXY"), None);
    }

    #[test]
    fn authorization_is_withheld_unless_configured_rfc3875_4_1_18() {
        let h = vec![(&b"Authorization"[..], &b"Basic dTpw"[..])];
        assert_eq!(
            get(&meta_variables(&sample(), h.clone()), "HTTP_AUTHORIZATION"),
            None
        );
        let mut r = sample();
        r.pass_authorization = true;
        assert_eq!(
            get(&meta_variables(&r, h), "HTTP_AUTHORIZATION"),
            Some(&b"Basic dTpw"[..])
        );
    }

    #[test]
    fn fields_with_underscores_are_dropped_so_they_cannot_spoof_others() {
        let env = meta_variables(&sample(), vec![(&b"X_Forwarded_For"[..], &b"1.2.3.4"[..])]);
        assert_eq!(get(&env, "HTTP_X_FORWARDED_FOR"), None);
    }

    #[test]
    fn no_path_info_means_no_path_translated_and_https_is_flagged() {
        let mut r = sample();
        r.path_info = "";
        r.https = true;
        r.content_length = None;
        let env = meta_variables(&r, Vec::new());
        assert_eq!(get(&env, "PATH_INFO"), None);
        assert_eq!(get(&env, "PATH_TRANSLATED"), None);
        assert_eq!(get(&env, "HTTPS"), Some(&b"on"[..]));
        assert_eq!(get(&env, "CONTENT_LENGTH"), None);
    }

    #[test]
    fn a_document_head_with_lf_or_crlf_lines_is_parsed_rfc3875_6_3() {
        for wire in [
            &b"Content-Type: text/plain\nX-A: 1\n\nbody"[..],
            b"Content-Type: text/plain\r\nX-A: 1\r\n\r\nbody",
        ] {
            let (h, n) = parse_head(wire, 8192).unwrap().unwrap();
            assert_eq!(&wire[n..], b"body");
            assert_eq!(h.content_type.as_deref(), Some(&b"text/plain"[..]));
            assert_eq!(h.headers, vec![("X-A".to_owned(), b"1".to_vec())]);
            assert_eq!(h.kind(), Kind::Document);
            assert_eq!(h.effective_status(), 200);
        }
    }

    #[test]
    fn a_head_split_anywhere_is_partial_until_its_blank_line() {
        let wire = b"Status: 404 Nope\r\nContent-Type: text/html\r\n\r\n<p>";
        for cut in 0..wire.len() - 3 {
            assert_eq!(parse_head(&wire[..cut], 8192), Ok(None), "cut {cut}");
        }
        let (h, _) = parse_head(wire, 8192).unwrap().unwrap();
        assert_eq!(h.status, Some(404));
        assert_eq!(h.reason.as_deref(), Some("Nope"));
    }

    #[test]
    fn a_bare_local_location_is_a_local_redirect_rfc3875_6_2_2() {
        let (h, _) = parse_head(b"Location: /other?x=1\n\n", 8192)
            .unwrap()
            .unwrap();
        assert_eq!(h.kind(), Kind::LocalRedirect(b"/other?x=1"));
    }

    #[test]
    fn absolute_or_decorated_locations_are_client_redirects_rfc3875_6_2_3() {
        let (h, _) = parse_head(b"Location: http://example.com/\n\n", 8192)
            .unwrap()
            .unwrap();
        assert_eq!(h.kind(), Kind::ClientRedirect);
        assert_eq!(h.effective_status(), 302);
        let (h, _) = parse_head(
            b"Status: 301\nLocation: /x\nContent-Type: text/html\n\n",
            8192,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.kind(), Kind::ClientRedirect);
        assert_eq!(h.effective_status(), 301);
        let (h, _) = parse_head(b"Location: //evil.example/\n\n", 8192)
            .unwrap()
            .unwrap();
        assert_eq!(h.kind(), Kind::ClientRedirect);
    }

    #[test]
    fn bad_heads_are_refused() {
        assert!(matches!(
            parse_head(b"\n", 8192),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse_head(b"no colon here\n\n", 8192),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse_head(b"Status: abc\n\n", 8192),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse_head(b"Status: 99\n\n", 8192),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse_head(b"Status: 2000\n\n", 8192),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse_head(b"Bad Name: x\n\n", 8192),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse_head(b"Content-Length: -1\n\n", 8192),
            Err(HeadError::Malformed(_))
        ));
        assert!(matches!(
            parse_head(b"X: a\rb\n\n", 8192),
            Err(HeadError::Malformed(_))
        ));
        assert_eq!(parse_head(&[b'a'; 100], 50), Err(HeadError::TooLarge));
        let many: Vec<u8> = (0..200)
            .flat_map(|i| format!("X-{i}: v\n").into_bytes())
            .collect();
        assert_eq!(parse_head(&many, 1 << 20), Err(HeadError::TooLarge));
    }

    #[test]
    fn hop_by_hop_and_server_owned_fields_are_dropped() {
        let (h, _) = parse_head(
            b"Content-Type: a/b\nConnection: close\nTransfer-Encoding: chunked\nDate: x\nServer: y\nX-Ok: 1\n\n",
            8192,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.headers, vec![("X-Ok".to_owned(), b"1".to_vec())]);
    }
}
