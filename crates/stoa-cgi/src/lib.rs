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

/// An environment: names and values in a stable order, packed in one byte
/// buffer (two allocations for the whole set, not two per variable: it is
/// built for every CGI and FastCGI request).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    buf: Vec<u8>,
    vars: Vec<Var>,
}

/// Where one variable's name and value are in `Env::buf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Var {
    name: (usize, usize),
    value: (usize, usize),
}

impl Env {
    pub fn new() -> Env {
        Env {
            buf: Vec::with_capacity(1024),
            vars: Vec::with_capacity(32),
        }
    }

    /// Appends a variable (a name already present is not replaced: see
    /// [`Env::set`]).
    pub fn push(&mut self, name: &str, value: &[u8]) {
        let n = self.buf.len();
        self.buf.extend_from_slice(name.as_bytes());
        let v = self.buf.len();
        self.buf.extend_from_slice(value);
        self.vars.push(Var {
            name: (n, name.len()),
            value: (v, value.len()),
        });
    }

    /// Appends a variable whose value is `n` in decimal.
    pub fn push_u64(&mut self, name: &str, n: u64) {
        let start = self.buf.len();
        self.buf.extend_from_slice(name.as_bytes());
        let v = self.buf.len();
        stoa_h1::push_u64(&mut self.buf, n);
        self.vars.push(Var {
            name: (start, name.len()),
            value: (v, self.buf.len() - v),
        });
    }

    /// Replaces the variable `name` (or appends it).
    pub fn set(&mut self, name: &str, value: &[u8]) {
        self.remove(name);
        self.push(name, value);
    }

    /// Removes every variable called `name`.
    pub fn remove(&mut self, name: &str) {
        let buf = &self.buf;
        self.vars
            .retain(|v| &buf[v.name.0..v.name.0 + v.name.1] != name.as_bytes());
    }

    /// Keeps only the variables for which `keep(name)` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        let buf = &self.buf;
        self.vars.retain(|v| {
            keep(std::str::from_utf8(&buf[v.name.0..v.name.0 + v.name.1]).unwrap_or(""))
        });
    }

    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The variables in order: (name, value).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        self.vars.iter().map(|v| {
            // Names are only ever pushed as `&str`.
            let name = std::str::from_utf8(&self.buf[v.name.0..v.name.0 + v.name.1]).unwrap_or("");
            (name, &self.buf[v.value.0..v.value.0 + v.value.1])
        })
    }

    pub fn len(&self) -> usize {
        self.vars.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// Appends `more` to the value of variable number `i` (repeated header
    /// fields joined into one list).
    fn extend_value(&mut self, i: usize, more: &[&[u8]]) {
        let Some(&Var {
            value: (start, len),
            ..
        }) = self.vars.get(i)
        else {
            return;
        };
        let at = if start + len == self.buf.len() {
            // The last value in the buffer grows in place.
            start
        } else {
            // Elsewhere: copied to the end, where it can grow.
            let at = self.buf.len();
            self.buf.extend_from_within(start..start + len);
            at
        };
        for m in more {
            self.buf.extend_from_slice(m);
        }
        self.vars[i].value = (at, self.buf.len() - at);
    }
}

/// Builds the meta-variables for `req` with the request's header fields
/// (name, value) in arrival order. The environment starts empty: nothing of
/// the server's own environment leaks in unless the caller appends it.
pub fn meta_variables<'h>(
    req: &Request<'_>,
    headers: impl IntoIterator<Item = (&'h [u8], &'h [u8])>,
) -> Env {
    let mut env = Env::new();
    if let Some(a) = req.auth_type {
        env.push("AUTH_TYPE", a.as_bytes());
    }
    if let Some(n) = req.content_length {
        env.push_u64("CONTENT_LENGTH", n);
    }
    env.push("GATEWAY_INTERFACE", b"CGI/1.1");
    if !req.path_info.is_empty() {
        env.push("PATH_INFO", req.path_info.as_bytes());
        // §4.1.6: the path info mapped through the document root.
        let root = req.document_root.trim_end_matches('/').as_bytes();
        env.push("PATH_TRANSLATED", root);
        let last = env.len() - 1;
        env.extend_value(last, &[req.path_info.as_bytes()]);
    }
    env.push("QUERY_STRING", req.query);
    if let Some(ip) = req.remote_addr {
        // An IPv4-mapped IPv6 peer is reported in its IPv4 form.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        let mut text = [0u8; 48];
        env.push("REMOTE_ADDR", fmt_ip(&mut text, ip));
        env.push_u64("REMOTE_PORT", u64::from(req.remote_port));
    }
    if let Some(u) = req.remote_user {
        env.push("REMOTE_USER", u.as_bytes());
    }
    env.push("REQUEST_METHOD", req.method.as_bytes());
    env.push("SCRIPT_NAME", req.script_name.as_bytes());
    env.push("SERVER_NAME", req.server_name.as_bytes());
    env.push_u64("SERVER_PORT", u64::from(req.server_port));
    env.push("SERVER_PROTOCOL", req.protocol.as_bytes());
    env.push("SERVER_SOFTWARE", req.server_software.as_bytes());
    env.push("DOCUMENT_ROOT", req.document_root.as_bytes());
    env.push("SCRIPT_FILENAME", req.script_filename.as_bytes());
    env.push("REQUEST_URI", req.request_uri);
    // php-cgi refuses to run without it (its force-cgi-redirect check).
    env.push("REDIRECT_STATUS", b"200");
    if req.https {
        env.push("HTTPS", b"on");
        env.push("REQUEST_SCHEME", b"https");
    } else {
        env.push("REQUEST_SCHEME", b"http");
    }

    // Protocol-specific meta-variables (§4.1.18): HTTP_ + the field name.
    let fixed = env.len();
    let mut var = String::with_capacity(64);
    for (name, value) in headers {
        if !http_var_name(name, req.pass_authorization, &mut var) {
            continue;
        }
        let found = env.iter().skip(fixed).position(|(k, _)| k == var);
        match found {
            // Repeated fields are joined as one list (RFC 9110 §5.3).
            Some(i) => env.extend_value(fixed + i, &[b", ", value]),
            None => env.push(&var, value),
        }
    }
    env
}

/// An IP address as text, written into `buf` (no allocation).
fn fmt_ip(buf: &mut [u8; 48], ip: IpAddr) -> &[u8] {
    use std::io::Write;
    let mut cur = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(cur, "{ip}");
    let n = cur.position() as usize;
    &buf[..n]
}

/// Writes into `v` the variable for a header field: `HTTP_` + the name
/// upper-cased with `-` as `_`. False for fields that must not reach a
/// script.
fn http_var_name(name: &[u8], pass_authorization: bool, v: &mut String) -> bool {
    v.clear();
    // CONTENT_LENGTH / CONTENT_TYPE have their own variables; Proxy would
    // become HTTP_PROXY, which libraries take as their proxy setting
    // (httpoxy, CVE-2016-5385); Authorization only when configured.
    if name.eq_ignore_ascii_case(b"content-length") || name.eq_ignore_ascii_case(b"proxy") {
        return false;
    }
    if name.eq_ignore_ascii_case(b"authorization") && !pass_authorization {
        return false;
    }
    if name.eq_ignore_ascii_case(b"content-type") {
        v.push_str("CONTENT_TYPE");
        return true;
    }
    // A field with `_` would collide with the `-` spelling of another field
    // (X-Real-IP vs X_Real_IP): drop it, as Apache and nginx do.
    if name.is_empty() || !name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-') {
        return false;
    }
    v.push_str("HTTP_");
    for &b in name {
        v.push(if b == b'-' {
            '_'
        } else {
            b.to_ascii_uppercase() as char
        });
    }
    true
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
        env.get(k)
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
    fn repeated_fields_join_even_with_others_between_rfc9110_5_3() {
        let hs = vec![
            (&b"Accept"[..], &b"a"[..]),
            (&b"X-One"[..], &b"1"[..]),
            (&b"Accept"[..], &b"b"[..]),
            (&b"X-Two"[..], &b"2"[..]),
            (&b"Accept"[..], &b"c"[..]),
        ];
        let env = meta_variables(&sample(), hs);
        assert_eq!(env.get("HTTP_ACCEPT"), Some(&b"a, b, c"[..]));
        assert_eq!(env.get("HTTP_X_ONE"), Some(&b"1"[..]));
        assert_eq!(env.get("HTTP_X_TWO"), Some(&b"2"[..]));
        let mut env = env;
        env.set("HTTP_X_ONE", b"one");
        env.remove("HTTP_X_TWO");
        assert_eq!(env.get("HTTP_X_ONE"), Some(&b"one"[..]));
        assert_eq!(env.get("HTTP_X_TWO"), None);
        assert_eq!(env.iter().filter(|(n, _)| *n == "HTTP_X_ONE").count(), 1);
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
