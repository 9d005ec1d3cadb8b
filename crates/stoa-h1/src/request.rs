//! Request heads: parsing (RFC 9112 §3, §5) and body framing (§6).

use crate::{eq_ignore_case, list_items, parse_u64, trim, Framing, Version};
use std::ops::Range;

/// Most headers a request may carry; more is answered with 431.
pub const MAX_HEADERS: usize = 100;

/// Request methods. The common ones are variants so that routing and the
/// static handler compare integers, not strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Options,
    Patch,
    Trace,
    Connect,
    Other(String),
}

impl Method {
    fn from_bytes(m: &str) -> Method {
        Method::from_token(m.as_bytes()).unwrap_or_else(|| Method::Other(m.to_owned()))
    }

    /// A method as HTTP/2 and HTTP/3 carry it (`:method`): the known ones
    /// by name, any other as `Other`; None when it is not UTF-8.
    pub fn from_token(m: &[u8]) -> Option<Method> {
        Some(match m {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"OPTIONS" => Method::Options,
            b"PATCH" => Method::Patch,
            b"TRACE" => Method::Trace,
            b"CONNECT" => Method::Connect,
            other => Method::Other(std::str::from_utf8(other).ok()?.to_owned()),
        })
    }

    /// The status for a request whose method a resource does not take:
    /// 405 for a method this server knows (RFC 9110 §15.5.6), 501 for one
    /// it does not recognise at all (§9.1, §15.6.2).
    pub fn not_allowed_status(&self) -> u16 {
        match self {
            Method::Other(_) => 501,
            _ => 405,
        }
    }

    /// RFC 9110 §9.2.2: a request with this method may be sent again
    /// after a connection failed before its response.
    pub fn is_idempotent(&self) -> bool {
        matches!(
            self,
            Method::Get
                | Method::Head
                | Method::Put
                | Method::Delete
                | Method::Options
                | Method::Trace
        )
    }

    pub fn as_str(&self) -> &str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Patch => "PATCH",
            Method::Trace => "TRACE",
            Method::Connect => "CONNECT",
            Method::Other(s) => s,
        }
    }
}

/// Size limits applied while parsing a head.
#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// Longest request head (request line and header fields) accepted.
    pub max_head_bytes: usize,
    /// Longest request-target accepted (414 beyond it).
    pub max_uri_bytes: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            max_head_bytes: 16 * 1024,
            max_uri_bytes: 8 * 1024,
        }
    }
}

/// Why a request head was refused. Each maps to one status code; all of them
/// end the connection because the framing of what follows is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Malformed request line or header field (400).
    Malformed,
    /// A protocol version other than HTTP/1.x (505; a higher minor version
    /// is parsed as HTTP/1.1, RFC 9110 §2.5).
    Version,
    /// Request-target longer than the limit (414).
    UriTooLong,
    /// Head larger than the limit, or too many fields (431).
    HeadTooLarge,
    /// Content-Length and Transfer-Encoding together, differing
    /// Content-Lengths, or chunked not last (400; RFC 9112 §6.3).
    BadFraming,
    /// A transfer coding this server does not implement (501; RFC 9112 §6.1).
    UnknownCoding,
    /// HTTP/1.1 request without exactly one Host (400; RFC 9112 §3.2).
    BadHost,
    /// An Expect value other than 100-continue (417; RFC 9110 §10.1.1).
    Expectation,
}

impl ParseError {
    pub fn status(self) -> u16 {
        match self {
            ParseError::Malformed | ParseError::BadFraming | ParseError::BadHost => 400,
            ParseError::Version => 505,
            ParseError::UriTooLong => 414,
            ParseError::HeadTooLarge => 431,
            ParseError::UnknownCoding => 501,
            ParseError::Expectation => 417,
        }
    }
}

/// A parsed request head. It owns a copy of the head's bytes; names, values
/// and the target are spans into it, so that parsing allocates twice at most
/// and a head can be reused for the next request on the connection.
#[derive(Debug, Clone)]
pub struct RequestHead {
    buf: Vec<u8>,
    pub method: Method,
    target: Range<usize>,
    pub version: Version,
    headers: Vec<(Range<usize>, Range<usize>)>,
    /// Bit `min(len, 63)` is set for every field name of that length among
    /// `headers`: [`RequestHead::header`] answers "absent" from it without
    /// a scan. A static response asks for up to nine fields (conditionals,
    /// Range, Accept-Encoding, the log's Referer and User-Agent) that most
    /// requests lack; the scans were 9 % of a small file's instructions.
    name_lens: u64,
    /// How the body is delimited.
    pub framing: Framing,
    /// Whether the connection may be reused after this exchange (RFC 9112 §9.3).
    pub keep_alive: bool,
    /// The client sent `Expect: 100-continue` (only honoured for HTTP/1.1).
    pub expect_continue: bool,
    /// The request's host: the Host header's value or, for an
    /// absolute-form target, its authority (RFC 9112 §3.2.2).
    host: Option<Range<usize>>,
    /// For an absolute-form target (`http://host/path?q`), its origin-form
    /// (`/path?q`; `/` when the path is empty).
    origin: Option<Range<usize>>,
    /// For a head made by [`RequestHead::rewritten`], the target the client
    /// sent.
    orig_target: Option<Range<usize>>,
}

impl Default for RequestHead {
    fn default() -> Self {
        RequestHead {
            buf: Vec::new(),
            method: Method::Get,
            target: 0..0,
            version: Version::Http11,
            headers: Vec::new(),
            name_lens: 0,
            framing: Framing::None,
            keep_alive: true,
            expect_continue: false,
            host: None,
            origin: None,
            orig_target: None,
        }
    }
}

fn span(base: &[u8], part: &[u8]) -> Range<usize> {
    // httparse hands out sub-slices of `base`; their offset is pointer arithmetic.
    let start = part.as_ptr() as usize - base.as_ptr() as usize;
    start..start + part.len()
}

impl RequestHead {
    /// Parses a request head from the start of `input`.
    ///
    /// Returns `Ok(None)` when more bytes are needed, or `Ok(Some(len))` with
    /// the length of the head (including the blank line) after filling `self`.
    /// Leading empty lines are skipped as RFC 9112 §2.2 allows.
    pub fn parse(
        &mut self,
        input: &[u8],
        limits: &RequestLimits,
    ) -> Result<Option<usize>, ParseError> {
        let mut skip = 0;
        while skip < input.len() && (input[skip] == b'\r' || input[skip] == b'\n') {
            skip += 1;
            if skip > 64 {
                return Err(ParseError::Malformed);
            }
        }
        let data = &input[skip..];
        let r = match self.parse_head(data, limits) {
            // RFC 9110 §2.5: a request with a higher minor version than the
            // server's is handled as the highest minor version it supports.
            Err(ParseError::Version) => match higher_minor(data) {
                Some(at) => {
                    let mut patched = data.to_vec();
                    patched[at] = b'1';
                    let r = self.parse_head(&patched, limits);
                    if let Ok(Some(_)) = r {
                        // The log shows the line as the client sent it.
                        self.buf[at] = data[at];
                    }
                    r
                }
                None => Err(ParseError::Version),
            },
            r => r,
        };
        Ok(r?.map(|n| skip + n))
    }

    /// [`RequestHead::parse`] after the leading empty lines: the head's
    /// length when it is complete.
    fn parse_head(
        &mut self,
        data: &[u8],
        limits: &RequestLimits,
    ) -> Result<Option<usize>, ParseError> {
        // Uninitialized: filling 100 empty headers before every parse was
        // ~600 instructions of a small static response (callgrind, issue 16).
        let mut storage =
            [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut []);
        let status = match req.parse_with_uninit_headers(data, &mut storage) {
            Ok(s) => s,
            Err(httparse::Error::TooManyHeaders) => return Err(ParseError::HeadTooLarge),
            Err(httparse::Error::Version) => return Err(classify_version(data)),
            Err(_) => return Err(ParseError::Malformed),
        };
        let head_len = match status {
            httparse::Status::Partial => {
                return match check_partial(data, limits) {
                    Some(e) => Err(e),
                    None => Ok(None),
                };
            }
            httparse::Status::Complete(n) => n,
        };
        if head_len > limits.max_head_bytes {
            return Err(ParseError::HeadTooLarge);
        }
        let (Some(method), Some(path), Some(minor)) = (req.method, req.path, req.version) else {
            return Err(ParseError::Malformed);
        };
        if path.len() > limits.max_uri_bytes {
            return Err(ParseError::UriTooLong);
        }
        // A fragment is the client's own business and never part of a
        // request-target (RFC 9112 §3.2, RFC 9110 §4.1): a target carrying
        // one is malformed, not a path that ends in `#...`. A plain loop:
        // targets are short, and `contains` is a memchr call that costs
        // more than the scan (callgrind, static route).
        if path.bytes().any(|b| b == b'#') {
            return Err(ParseError::Malformed);
        }
        self.buf.clear();
        self.buf.extend_from_slice(&data[..head_len]);
        let base = &data[..head_len];
        self.method = Method::from_bytes(method);
        self.target = span(base, path.as_bytes());
        self.version = if minor == 0 {
            Version::Http10
        } else {
            Version::Http11
        };
        self.headers.clear();
        self.name_lens = 0;
        self.host = None;
        self.expect_continue = false;

        let mut content_length: Option<u64> = None;
        let mut te_seen = false;
        let mut chunked = false;
        let mut conn_close = false;
        let mut conn_keep_alive = false;
        let mut hosts = 0;
        let mut host_field = None;
        for h in req.headers.iter() {
            let name = h.name.as_bytes();
            let value = trim(h.value);
            self.headers.push((span(base, name), span(base, value)));
            self.name_lens |= len_bit(name.len());
            match name.len() {
                4 if eq_ignore_case(name, b"host") => {
                    // RFC 9112 §3.2: a Host that is not `uri-host[:port]`
                    // is 400, whatever the target.
                    if !valid_authority(value, true) {
                        return Err(ParseError::BadHost);
                    }
                    hosts += 1;
                    self.host = Some(span(base, value));
                    host_field = Some(self.headers.len() - 1);
                }
                6 if eq_ignore_case(name, b"expect") => {
                    if eq_ignore_case(value, b"100-continue") {
                        self.expect_continue = self.version == Version::Http11;
                    } else {
                        return Err(ParseError::Expectation);
                    }
                }
                10 if eq_ignore_case(name, b"connection") => {
                    for t in list_items(value) {
                        if eq_ignore_case(t, b"close") {
                            conn_close = true;
                        } else if eq_ignore_case(t, b"keep-alive") {
                            conn_keep_alive = true;
                        }
                    }
                }
                14 if eq_ignore_case(name, b"content-length") => {
                    // A list of identical values is one length (RFC 9112 §6.3
                    // item 5); anything else is a smuggling attempt.
                    for item in value.split(|&b| b == b',') {
                        let n = parse_u64(trim(item)).ok_or(ParseError::BadFraming)?;
                        match content_length {
                            Some(prev) if prev != n => return Err(ParseError::BadFraming),
                            _ => content_length = Some(n),
                        }
                    }
                }
                17 if eq_ignore_case(name, b"transfer-encoding") => {
                    for coding in list_items(value) {
                        if chunked {
                            // Anything after chunked means chunked is not the
                            // final coding: §6.3 item 4 says 400.
                            return Err(ParseError::BadFraming);
                        }
                        if eq_ignore_case(coding, b"chunked") {
                            chunked = true;
                        } else {
                            return Err(ParseError::UnknownCoding);
                        }
                    }
                    te_seen = true;
                }
                _ => {}
            }
        }
        if self.version == Version::Http11 && hosts != 1 || hosts > 1 {
            return Err(ParseError::BadHost);
        }
        self.origin = None;
        self.orig_target = None;
        let t = &self.buf[self.target.clone()];
        let scheme_len = if t.len() >= 7 && t[..7].eq_ignore_ascii_case(b"http://") {
            7
        } else if t.len() >= 8 && t[..8].eq_ignore_ascii_case(b"https://") {
            8
        } else {
            0
        };
        if scheme_len > 0 {
            // Absolute form: the target's authority replaces Host, for
            // routing and for applications alike (RFC 9112 §3.2.2).
            let rest = &t[scheme_len..];
            let auth_len = rest
                .iter()
                .position(|&b| b == b'/' || b == b'?')
                .unwrap_or(rest.len());
            if !valid_authority(&rest[..auth_len], false) {
                return Err(ParseError::Malformed);
            }
            let auth_start = self.target.start + scheme_len;
            let auth = auth_start..auth_start + auth_len;
            let path_start = auth.end;
            self.origin = Some(if rest.get(auth_len) == Some(&b'/') {
                path_start..self.target.end
            } else {
                // `http://h` or `http://h?q`: the origin-form is `/` or `/?q`.
                let start = self.buf.len();
                self.buf.push(b'/');
                self.buf.extend_from_within(path_start..self.target.end);
                start..self.buf.len()
            });
            match host_field {
                Some(i) => self.headers[i].1 = auth.clone(),
                None => {
                    // HTTP/1.0 without Host: applications get one all the same.
                    let start = self.buf.len();
                    self.buf.extend_from_slice(b"Host");
                    self.headers.push((start..self.buf.len(), auth.clone()));
                    self.name_lens |= len_bit(4);
                }
            }
            self.host = Some(auth);
        }
        self.framing = if te_seen {
            if content_length.is_some() || !chunked || self.version == Version::Http10 {
                // Both framings at once, an empty Transfer-Encoding, or
                // chunked in HTTP/1.0 (RFC 9112 §6.1: the framing is faulty).
                return Err(ParseError::BadFraming);
            }
            Framing::Chunked
        } else {
            match content_length {
                Some(0) | None => Framing::None,
                Some(n) => Framing::Length(n),
            }
        };
        self.keep_alive = match self.version {
            Version::Http11 => !conn_close,
            Version::Http10 => conn_keep_alive && !conn_close,
        };
        Ok(Some(head_len))
    }

    /// The bytes of the head as parsed (request line, fields and the empty
    /// line), for the access log's request length.
    pub fn head_len(&self) -> usize {
        self.buf.len()
    }

    /// The request-target exactly as sent.
    pub fn target(&self) -> &[u8] {
        &self.buf[self.target.clone()]
    }

    /// The target in origin-form (`/path?query`): an absolute-form target
    /// without its scheme and authority.
    pub fn origin_form(&self) -> &[u8] {
        match &self.origin {
            Some(r) => &self.buf[r.clone()],
            None => self.target(),
        }
    }

    /// The path part of the target (before `?`), as sent (still encoded).
    /// For an absolute-form target this is the part after the authority
    /// (`/` when empty).
    pub fn path(&self) -> &[u8] {
        let t = self.origin_form();
        match t.iter().position(|&b| b == b'?') {
            Some(i) => &t[..i],
            None => t,
        }
    }

    /// The query string (after `?`), without the `?`.
    pub fn query(&self) -> Option<&[u8]> {
        let t = self.origin_form();
        t.iter().position(|&b| b == b'?').map(|i| &t[i + 1..])
    }

    /// The request's host: the authority of an absolute-form target, else
    /// the Host header's value, if present. For an absolute-form target
    /// the Host header itself reads as the authority too (RFC 9112
    /// §3.2.2), in [`RequestHead::header`] and [`RequestHead::headers`].
    pub fn host(&self) -> Option<&[u8]> {
        self.host.clone().map(|r| &self.buf[r])
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        let name = name.as_bytes();
        if self.name_lens & len_bit(name.len()) == 0 {
            return None;
        }
        self.headers
            .iter()
            .find(|(n, _)| eq_ignore_case(&self.buf[n.clone()], name))
            .map(|(_, v)| &self.buf[v.clone()])
    }

    /// Every header in order, as (name, value).
    pub fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> + Clone {
        self.headers
            .iter()
            .map(|(n, v)| (&self.buf[n.clone()], &self.buf[v.clone()]))
    }

    /// The request line, for logs (`GET /x HTTP/1.1`).
    pub fn request_line(&self) -> &[u8] {
        let end = self
            .buf
            .iter()
            .position(|&b| b == b'\r' || b == b'\n')
            .unwrap_or(self.buf.len());
        &self.buf[..end]
    }

    /// Whether a body follows the head.
    pub fn has_body(&self) -> bool {
        !matches!(self.framing, Framing::None)
    }

    /// The target the client sent, before any internal rewrite, in
    /// origin-form: what applications see as REQUEST_URI.
    pub fn original_target(&self) -> &[u8] {
        match &self.orig_target {
            Some(r) => &self.buf[r.clone()],
            None => self.origin_form(),
        }
    }

    /// A bodyless request made inside the server from its parts, never
    /// from HTTP/1 text: a local redirect (RFC 3875 §6.2.2), a subrequest,
    /// an HTTP/2 stream's head. `target` is in origin-form; the host is
    /// the `Host` field among `headers`, if any. Its bytes are laid out as
    /// a head would be, so [`RequestHead::request_line`] reads
    /// `METHOD target VERSION` for the log.
    pub fn from_parts<'h>(
        method: Method,
        target: &[u8],
        version: Version,
        headers: impl IntoIterator<Item = (&'h [u8], &'h [u8])>,
    ) -> RequestHead {
        let mut head = RequestHead {
            buf: Vec::with_capacity(256),
            ..RequestHead::default()
        };
        head.refill(method, target, version, headers);
        head
    }

    /// [`RequestHead::from_parts`] into this head, whose buffers are
    /// reused (an HTTP/2 connection keeps the heads of ended streams for
    /// the next ones: two allocations fewer per request).
    pub fn refill<'h>(
        &mut self,
        method: Method,
        target: &[u8],
        version: Version,
        headers: impl IntoIterator<Item = (&'h [u8], &'h [u8])>,
    ) {
        let mut buf = std::mem::take(&mut self.buf);
        let mut spans = std::mem::take(&mut self.headers);
        buf.clear();
        spans.clear();
        buf.extend_from_slice(method.as_str().as_bytes());
        buf.push(b' ');
        let t0 = buf.len();
        buf.extend_from_slice(target);
        let target = t0..buf.len();
        buf.push(b' ');
        buf.extend_from_slice(version.as_str().as_bytes());
        buf.extend_from_slice(b"\r\n");
        let mut host = None;
        let mut name_lens = 0;
        for (name, value) in headers {
            name_lens |= len_bit(name.len());
            let n0 = buf.len();
            buf.extend_from_slice(name);
            let n = n0..buf.len();
            buf.extend_from_slice(b": ");
            let v0 = buf.len();
            buf.extend_from_slice(value);
            let v = v0..buf.len();
            buf.extend_from_slice(b"\r\n");
            if host.is_none() && eq_ignore_case(name, b"host") {
                host = Some(v.clone());
            }
            spans.push((n, v));
        }
        buf.extend_from_slice(b"\r\n");
        *self = RequestHead {
            buf,
            method,
            target,
            version,
            headers: spans,
            name_lens,
            framing: Framing::None,
            keep_alive: true,
            expect_continue: false,
            host,
            origin: None,
            orig_target: None,
        };
    }

    /// The memory this head holds (its buffers' capacities), for a caller
    /// deciding whether to keep it for reuse.
    pub fn held(&self) -> usize {
        self.buf.capacity()
            + self.headers.capacity() * std::mem::size_of::<(Range<usize>, Range<usize>)>()
    }

    /// Whether this head came from [`RequestHead::rewritten`].
    pub fn is_rewritten(&self) -> bool {
        self.orig_target.is_some()
    }

    /// The same request with another origin-form target (an internal
    /// rewrite or redirect inside the server): method, headers, framing,
    /// the host and the original target are kept.
    pub fn rewritten(&self, target: &[u8]) -> RequestHead {
        let mut new = self.clone();
        let start = new.buf.len();
        new.buf.extend_from_slice(target);
        let orig = self.origin.clone().unwrap_or(self.target.clone());
        new.orig_target = Some(self.orig_target.clone().unwrap_or(orig));
        new.target = start..new.buf.len();
        // The host (an absolute-form authority included) stays.
        new.origin = None;
        new
    }
}

/// The bit of `RequestHead::name_lens` for a field name of `len` bytes.
#[inline]
fn len_bit(len: usize) -> u64 {
    1 << len.min(63)
}

/// A version error is 505 when the line names some other HTTP version, and
/// 400 when the line is simply broken.
fn classify_version(data: &[u8]) -> ParseError {
    let line_end = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let line = trim(strip_cr(&data[..line_end]));
    match line.rsplit(|&b| b == b' ').next() {
        Some([b'H', b'T', b'T', b'P', b'/', major, b'.', minor])
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            ParseError::Version
        }
        Some([b'H', b'T', b'T', b'P', b'/', major]) if major.is_ascii_digit() => {
            ParseError::Version
        }
        _ => ParseError::Malformed,
    }
}

/// Where the minor digit of `HTTP/1.x` with x > 1 is in the request line,
/// if that is the version the line names.
fn higher_minor(data: &[u8]) -> Option<usize> {
    let line_end = data.iter().position(|&b| b == b'\n').unwrap_or(data.len());
    let line = strip_cr(&data[..line_end]);
    match line {
        [.., b' ', b'H', b'T', b'T', b'P', b'/', b'1', b'.', b'2'..=b'9'] => Some(line.len() - 1),
        _ => None,
    }
}

/// Whether `a` is `uri-host [ ":" port ]` (RFC 3986 §3.2.2, §3.2.3): the
/// grammar of Host (RFC 9110 §7.2) and of an http(s) authority without
/// userinfo. An empty value is allowed only for Host (`empty_ok`), as RFC
/// 9112 §3.2 does for targets without an authority. Beyond the grammar,
/// an empty label (`a..b`, `..`) is refused, as nginx does: no DNS name
/// has one, and `..` in SERVER_NAME is a path waiting to be joined.
fn valid_authority(a: &[u8], empty_ok: bool) -> bool {
    if a.is_empty() {
        return empty_ok;
    }
    let (host, port) = if a[0] == b'[' {
        let Some(end) = a.iter().position(|&b| b == b']') else {
            return false;
        };
        if !valid_ip_literal(&a[1..end]) {
            return false;
        }
        match &a[end + 1..] {
            [] => return true,
            [b':', port @ ..] => (&a[..=end], port),
            _ => return false,
        }
    } else {
        match a.iter().position(|&b| b == b':') {
            Some(i) => (&a[..i], &a[i + 1..]),
            None => (a, &[][..]),
        }
    };
    if host.is_empty() || !port.iter().all(u8::is_ascii_digit) {
        return false;
    }
    if host[0] == b'[' {
        return true;
    }
    // reg-name (an IPv4 address is one too): unreserved, pct-encoded,
    // sub-delims.
    let mut i = 0;
    while i < host.len() {
        match host[i] {
            b'%' => {
                let hex = |j: usize| host.get(j).is_some_and(u8::is_ascii_hexdigit);
                if !(hex(i + 1) && hex(i + 2)) {
                    return false;
                }
                i += 3;
                continue;
            }
            b'.' if i > 0 && host[i - 1] == b'.' => return false,
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {}
            b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' => {}
            _ => return false,
        }
        i += 1;
    }
    true
}

/// The inside of `[...]`: an IPv6 address or `v<hex>.<chars>` (IPvFuture).
fn valid_ip_literal(s: &[u8]) -> bool {
    if let [b'v' | b'V', rest @ ..] = s {
        let Some(dot) = rest.iter().position(|&b| b == b'.') else {
            return false;
        };
        return dot > 0
            && rest[..dot].iter().all(u8::is_ascii_hexdigit)
            && rest.len() > dot + 1
            && rest[dot + 1..]
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:".contains(&b));
    }
    std::str::from_utf8(s).is_ok_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok())
}

fn strip_cr(s: &[u8]) -> &[u8] {
    match s {
        [rest @ .., b'\r'] => rest,
        _ => s,
    }
}

/// Decides whether an incomplete head has already broken a limit: a request
/// line without its end longer than the URI limit is 414, a head past the
/// head limit is 431.
fn check_partial(data: &[u8], limits: &RequestLimits) -> Option<ParseError> {
    if !data.contains(&b'\n') {
        // Only the target counts against the URI limit, so the verdict
        // cannot depend on where TCP cut the line (a long method with a
        // normal target is not 414; found by fuzzing).
        if let Some(sp) = data.iter().position(|&b| b == b' ') {
            let rest = &data[sp + 1..];
            let target = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
            if target > limits.max_uri_bytes {
                return Some(ParseError::UriTooLong);
            }
        }
    }
    if data.len() > limits.max_head_bytes {
        return Some(ParseError::HeadTooLarge);
    }
    None
}

#[cfg(test)]
mod tests {
    /// `header` skips the scan when no field name has the asked length;
    /// names of 63 bytes and more share one bit, and a second parse on the
    /// same head forgets the first one's names.
    #[test]
    fn header_lookup_finds_every_name_length_and_forgets_the_last_request() {
        let long = "X-".to_owned() + &"a".repeat(70);
        let longer = "X-".to_owned() + &"b".repeat(90);
        let raw =
            format!("GET / HTTP/1.1\r\nHost: ex\r\n{long}: 1\r\nIf-None-Match: \"t\"\r\n\r\n");
        let limits = RequestLimits::default();
        let mut h = RequestHead::default();
        assert!(matches!(h.parse(raw.as_bytes(), &limits), Ok(Some(_))));
        assert_eq!(h.header("host"), Some(&b"ex"[..]));
        assert_eq!(h.header(&long.to_uppercase()), Some(&b"1"[..]));
        assert_eq!(h.header(&longer), None);
        assert_eq!(h.header("if-none-match"), Some(&b"\"t\""[..]));
        assert_eq!(h.header("if-match"), None);
        let raw2 = b"GET / HTTP/1.1\r\nHost: ex\r\n\r\n";
        assert!(matches!(h.parse(raw2, &limits), Ok(Some(_))));
        assert_eq!(h.header("if-none-match"), None);
        let parts = RequestHead::from_parts(
            Method::Get,
            b"/",
            Version::Http11,
            [(&b"Range"[..], &b"bytes=0-1"[..])],
        );
        assert_eq!(parts.header("range"), Some(&b"bytes=0-1"[..]));
        assert_eq!(parts.header("host"), None);
    }

    #[test]
    fn a_rewritten_head_keeps_the_request_but_routes_its_new_target() {
        let mut h = RequestHead::default();
        let raw = b"POST /_media/a.png?w=2 HTTP/1.1\r\nHost: ex\r\nContent-Length: 3\r\n\r\n";
        let limits = RequestLimits {
            max_head_bytes: 4096,
            max_uri_bytes: 4096,
        };
        assert!(matches!(h.parse(raw, &limits), Ok(Some(_))));
        let r = h.rewritten(b"/fetch.php?media=a.png&w=2");
        assert_eq!(r.method, Method::Post);
        assert_eq!(r.framing, Framing::Length(3));
        assert_eq!(r.path(), b"/fetch.php");
        assert_eq!(r.query(), Some(&b"media=a.png&w=2"[..]));
        assert_eq!(r.host(), Some(&b"ex"[..]));
        assert_eq!(r.original_target(), b"/_media/a.png?w=2");
        assert_eq!(r.request_line(), b"POST /_media/a.png?w=2 HTTP/1.1");
        assert!(r.is_rewritten() && !h.is_rewritten());
        // Rewriting again keeps the client's target.
        let rr = r.rewritten(b"/x");
        assert_eq!(rr.original_target(), b"/_media/a.png?w=2");
        // An absolute-form request keeps its authority as the host.
        let raw = b"GET http://a.example/x HTTP/1.1\r\nHost: b.example\r\n\r\n";
        assert!(matches!(h.parse(raw, &limits), Ok(Some(_))));
        let r = h.rewritten(b"/y?q");
        assert_eq!(r.path(), b"/y");
        assert_eq!(r.host(), Some(&b"a.example"[..]));
    }

    use super::*;

    fn parse(bytes: &[u8]) -> Result<Option<(RequestHead, usize)>, ParseError> {
        let mut h = RequestHead::default();
        let r = h.parse(bytes, &RequestLimits::default())?;
        Ok(r.map(|n| (h, n)))
    }

    fn complete(bytes: &[u8]) -> RequestHead {
        match parse(bytes) {
            Ok(Some((h, n))) => {
                assert_eq!(n, bytes.len());
                h
            }
            other => panic!("expected a complete head, got {other:?}"),
        }
    }

    #[test]
    fn a_head_made_from_parts_reads_like_a_parsed_one() {
        let h = RequestHead::from_parts(
            Method::Get,
            b"/new?x=1",
            Version::Http11,
            [(&b"Host"[..], &b"example.test"[..]), (b"Accept", b"*/*")],
        );
        assert_eq!(h.path(), b"/new");
        assert_eq!(h.query(), Some(&b"x=1"[..]));
        assert_eq!(h.host(), Some(&b"example.test"[..]));
        assert_eq!(h.header("accept"), Some(&b"*/*"[..]));
        assert_eq!(h.request_line(), b"GET /new?x=1 HTTP/1.1");
        assert_eq!(h.original_target(), b"/new?x=1");
        assert!(!h.has_body());
        assert_eq!(h.headers().count(), 2);
    }

    #[test]
    fn a_refilled_head_forgets_everything_of_the_one_before() {
        let mut h = RequestHead::from_parts(
            Method::Other("PROPFIND".into()),
            b"/old/long/path?q=1",
            Version::Http11,
            [(&b"Host"[..], &b"old.test"[..]), (b"Cookie", b"a=1")],
        );
        h.framing = Framing::Chunked;
        h.expect_continue = true;
        let fresh = RequestHead::from_parts(
            Method::Head,
            b"/n",
            Version::Http11,
            [(&b"Accept"[..], &b"*/*"[..])],
        );
        h.refill(
            Method::Head,
            b"/n",
            Version::Http11,
            [(&b"Accept"[..], &b"*/*"[..])],
        );
        assert_eq!(h.method, Method::Head);
        assert_eq!(h.request_line(), fresh.request_line());
        assert_eq!(h.host(), None);
        assert_eq!(h.header("cookie"), None);
        assert_eq!(h.header("accept"), Some(&b"*/*"[..]));
        assert_eq!(h.headers().count(), 1);
        assert_eq!(h.query(), None);
        assert_eq!(h.framing, Framing::None);
        assert!(!h.expect_continue);
    }

    #[test]
    fn simple_get_is_parsed_with_target_path_query_and_host() {
        let h = complete(b"GET /a/b?x=1&y HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n");
        assert_eq!(h.method, Method::Get);
        assert_eq!(h.target(), b"/a/b?x=1&y");
        assert_eq!(h.path(), b"/a/b");
        assert_eq!(h.query(), Some(&b"x=1&y"[..]));
        assert_eq!(h.host(), Some(&b"example.com"[..]));
        assert_eq!(h.header("accept"), Some(&b"*/*"[..]));
        assert_eq!(h.version, Version::Http11);
        assert!(h.keep_alive);
        assert_eq!(h.framing, Framing::None);
        assert_eq!(h.request_line(), b"GET /a/b?x=1&y HTTP/1.1");
    }

    #[test]
    fn a_head_split_at_every_byte_is_partial_until_the_blank_line() {
        let full = b"POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello";
        let head_len = full.len() - 5;
        for cut in 0..head_len {
            match parse(&full[..cut]) {
                Ok(None) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        for cut in head_len..=full.len() {
            let (h, n) = parse(&full[..cut]).expect("ok").expect("complete");
            assert_eq!(n, head_len);
            assert_eq!(h.framing, Framing::Length(5));
            assert_eq!(h.method, Method::Post);
        }
    }

    #[test]
    fn leading_empty_lines_are_skipped_rfc9112_2_2() {
        let (h, n) = parse(b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.target(), b"/");
        assert_eq!(n, 4 + 27);
    }

    #[test]
    fn http10_is_closed_unless_keep_alive_is_asked_for_rfc9112_9_3() {
        assert!(!complete(b"GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(complete(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
        assert!(!complete(b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n").keep_alive);
        assert!(!complete(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keep_alive);
        assert!(complete(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n").keep_alive);
    }

    #[test]
    fn content_length_and_transfer_encoding_together_are_refused_rfc9112_6_3() {
        let e = parse(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(e.unwrap_err(), ParseError::BadFraming);
        let e = parse(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n");
        assert_eq!(e.unwrap_err(), ParseError::BadFraming);
    }

    #[test]
    fn differing_content_lengths_are_refused_but_identical_ones_accepted_rfc9112_6_3() {
        let e =
            parse(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n");
        assert_eq!(e.unwrap_err(), ParseError::BadFraming);
        let e = parse(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 4\r\n\r\n");
        assert_eq!(e.unwrap_err(), ParseError::BadFraming);
        let h = complete(
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
        );
        assert_eq!(h.framing, Framing::Length(3));
        let h = complete(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3,3\r\n\r\n");
        assert_eq!(h.framing, Framing::Length(3));
    }

    #[test]
    fn bad_content_length_values_are_refused() {
        for v in [
            &b"-1"[..],
            b"+3",
            b"0x10",
            b"1 2",
            b"",
            b"99999999999999999999",
        ] {
            let mut req = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ".to_vec();
            req.extend_from_slice(v);
            req.extend_from_slice(b"\r\n\r\n");
            assert_eq!(
                parse(&req).unwrap_err(),
                ParseError::BadFraming,
                "{:?}",
                String::from_utf8_lossy(v)
            );
        }
    }

    #[test]
    fn transfer_codings_other_than_chunked_are_not_implemented_rfc9112_6_1() {
        let e = parse(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
        assert_eq!(e.unwrap_err(), ParseError::UnknownCoding);
        assert_eq!(ParseError::UnknownCoding.status(), 501);
        let e = parse(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n");
        assert_eq!(e.unwrap_err(), ParseError::UnknownCoding);
    }

    #[test]
    fn chunked_that_is_not_the_final_coding_is_refused_rfc9112_6_3() {
        let e = parse(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n");
        assert_eq!(e.unwrap_err(), ParseError::BadFraming);
        let e = parse(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(e.unwrap_err(), ParseError::BadFraming);
        let e = parse(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n\r\n");
        assert_eq!(e.unwrap_err(), ParseError::BadFraming);
    }

    #[test]
    fn chunked_in_http10_is_refused_rfc9112_6_1() {
        let e = parse(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert_eq!(e.unwrap_err(), ParseError::BadFraming);
    }

    #[test]
    fn chunked_transfer_encoding_is_case_insensitive() {
        let h = complete(b"POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: Chunked\r\n\r\n");
        assert_eq!(h.framing, Framing::Chunked);
    }

    #[test]
    fn http11_without_host_or_with_two_hosts_is_refused_rfc9112_3_2() {
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\n\r\n").unwrap_err(),
            ParseError::BadHost
        );
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").unwrap_err(),
            ParseError::BadHost
        );
        assert!(complete(b"GET / HTTP/1.0\r\n\r\n").host().is_none());
    }

    #[test]
    fn a_target_with_a_fragment_is_malformed_rfc9112_3_2_rfc9110_4_1() {
        for bad in [
            &b"GET /x#frag HTTP/1.1\r\nHost: a\r\n\r\n"[..],
            b"GET /x?q=1#f HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET http://a/x#f HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET # HTTP/1.1\r\nHost: a\r\n\r\n",
        ] {
            assert_eq!(
                parse(bad).map(|o| o.map(|(_, n)| n)),
                Err(ParseError::Malformed),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // An encoded `#` is an ordinary byte of the path.
        assert_eq!(
            complete(b"GET /x%23y HTTP/1.1\r\nHost: a\r\n\r\n").path(),
            b"/x%23y"
        );
    }

    #[test]
    fn an_unknown_method_is_501_and_a_known_one_not_allowed_is_405_rfc9110_15_6_2() {
        assert_eq!(Method::Post.not_allowed_status(), 405);
        assert_eq!(Method::Connect.not_allowed_status(), 405);
        let h = complete(b"BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(h.method, Method::Other("BREW".into()));
        assert_eq!(h.method.not_allowed_status(), 501);
    }

    #[test]
    fn malformed_request_lines_and_fields_are_400() {
        for bad in [
            &b"GET\r\n\r\n"[..],
            b"GET / HTTP/1.1 extra\r\nHost: a\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost a\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
            b"GET / HTTP/1.1\r\nHo\0st: a\r\n\r\n",
            b"G(T / HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
        ] {
            assert_eq!(
                parse(bad).map(|o| o.map(|(_, n)| n)),
                Err(ParseError::Malformed),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn other_http_versions_are_505_rfc9110_15_6_6() {
        for line in [
            &b"GET / HTTP/2.0\r\n\r\n"[..],
            b"GET / HTTP/0.9\r\n\r\n",
            b"GET / HTTP/3\r\n\r\n",
        ] {
            assert_eq!(
                parse(line).unwrap_err(),
                ParseError::Version,
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
        assert_eq!(
            parse(b"GET / FOO/1.1\r\n\r\n").unwrap_err(),
            ParseError::Malformed
        );
    }

    #[test]
    fn a_higher_minor_version_is_parsed_as_http_1_1_rfc9110_2_5() {
        let full = b"GET /a HTTP/1.2\r\nHost: a\r\n\r\n";
        let h = complete(full);
        assert_eq!(h.version, Version::Http11);
        assert!(h.keep_alive);
        assert_eq!(h.target(), b"/a");
        assert_eq!(h.host(), Some(&b"a"[..]));
        // Logged as sent.
        assert_eq!(h.request_line(), b"GET /a HTTP/1.2");
        for cut in 0..full.len() {
            assert!(matches!(parse(&full[..cut]), Ok(None)), "cut at {cut}");
        }
        // As HTTP/1.1, it needs a Host.
        assert_eq!(
            parse(b"GET / HTTP/1.9\r\n\r\n").unwrap_err(),
            ParseError::BadHost
        );
        let wire = b"\r\nPOST / HTTP/1.9\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi";
        let (h, n) = parse(wire).unwrap().unwrap();
        assert_eq!(
            (h.version, h.framing, n),
            (Version::Http11, Framing::Length(2), wire.len() - 2)
        );
        assert_eq!(
            parse(b"GET / HTTP/1.12\r\nHost: a\r\n\r\n").unwrap_err(),
            ParseError::Malformed
        );
    }

    #[test]
    fn a_long_target_is_414_and_a_large_head_431_rfc9112_3() {
        let limits = RequestLimits {
            max_head_bytes: 1024,
            max_uri_bytes: 256,
        };
        let mut h = RequestHead::default();
        let long = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(300));
        assert_eq!(
            h.parse(long.as_bytes(), &limits),
            Err(ParseError::UriTooLong)
        );
        let partial = format!("GET /{}", "a".repeat(300));
        assert_eq!(
            h.parse(partial.as_bytes(), &limits),
            Err(ParseError::UriTooLong)
        );
        let big = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
            "b".repeat(1100)
        );
        assert_eq!(
            h.parse(big.as_bytes(), &limits),
            Err(ParseError::HeadTooLarge)
        );
        let partial = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}", "b".repeat(1100));
        assert_eq!(
            h.parse(partial.as_bytes(), &limits),
            Err(ParseError::HeadTooLarge)
        );
        let mut many = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
        for i in 0..MAX_HEADERS {
            many.push_str(&format!("X{i}: v\r\n"));
        }
        many.push_str("\r\n");
        assert_eq!(
            h.parse(
                many.as_bytes(),
                &RequestLimits {
                    max_head_bytes: 1 << 20,
                    max_uri_bytes: 8192
                }
            ),
            Err(ParseError::HeadTooLarge)
        );
    }

    #[test]
    fn expect_100_continue_is_noted_only_for_http11_and_others_are_417_rfc9110_10_1_1() {
        let h = complete(
            b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n",
        );
        assert!(h.expect_continue);
        let h = complete(b"PUT / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n");
        assert!(!h.expect_continue);
        assert_eq!(
            parse(b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\n\r\n").unwrap_err(),
            ParseError::Expectation
        );
    }

    #[test]
    fn absolute_form_targets_give_path_and_host_rfc9112_3_2_2() {
        let h = complete(b"GET http://Example.com:8080/a/b?q=1 HTTP/1.1\r\nHost: other\r\n\r\n");
        assert_eq!(h.path(), b"/a/b");
        assert_eq!(h.query(), Some(&b"q=1"[..]));
        assert_eq!(h.host(), Some(&b"Example.com:8080"[..]));
        let h = complete(b"GET HTTPS://example.com HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(h.path(), b"/");
        assert_eq!(h.host(), Some(&b"example.com"[..]));
        assert_eq!(
            parse(b"GET http:///x HTTP/1.1\r\nHost: x\r\n\r\n").unwrap_err(),
            ParseError::Malformed
        );
        assert_eq!(
            parse(b"GET http://user@h/x HTTP/1.1\r\nHost: x\r\n\r\n").unwrap_err(),
            ParseError::Malformed
        );
        assert_eq!(
            parse(b"GET http://a%zz/x HTTP/1.1\r\nHost: x\r\n\r\n").unwrap_err(),
            ParseError::Malformed
        );
        assert_eq!(
            parse(b"GET http://a:8x/x HTTP/1.1\r\nHost: x\r\n\r\n").unwrap_err(),
            ParseError::Malformed
        );
    }

    #[test]
    fn an_absolute_form_authority_replaces_host_everywhere_rfc9112_3_2_2() {
        let h = complete(
            b"GET http://evil.example:81/cgi-bin/env.sh?a=1 HTTP/1.1\r\nX: 1\r\nHost: good.example\r\n\r\n",
        );
        assert_eq!(h.host(), Some(&b"evil.example:81"[..]));
        assert_eq!(h.header("host"), Some(&b"evil.example:81"[..]));
        let hs: Vec<_> = h.headers().collect();
        assert_eq!(
            hs,
            vec![
                (&b"X"[..], &b"1"[..]),
                (&b"Host"[..], &b"evil.example:81"[..])
            ]
        );
        // REQUEST_URI is the origin-form.
        assert_eq!(h.original_target(), b"/cgi-bin/env.sh?a=1");
        assert_eq!(h.target(), b"http://evil.example:81/cgi-bin/env.sh?a=1");
        let r = h.rewritten(b"/other");
        assert_eq!(r.original_target(), b"/cgi-bin/env.sh?a=1");
        assert_eq!(r.header("host"), Some(&b"evil.example:81"[..]));
        // No path: `/`, with the query kept.
        let h = complete(b"GET http://a.example?q=1 HTTP/1.1\r\nHost: b\r\n\r\n");
        assert_eq!(h.original_target(), b"/?q=1");
        assert_eq!(h.path(), b"/");
        assert_eq!(h.query(), Some(&b"q=1"[..]));
        assert_eq!(h.request_line(), b"GET http://a.example?q=1 HTTP/1.1");
        // HTTP/1.0 without Host: the authority is the Host all the same.
        let h = complete(b"GET http://[::1]:8080 HTTP/1.0\r\n\r\n");
        assert_eq!(h.header("host"), Some(&b"[::1]:8080"[..]));
        assert_eq!(h.original_target(), b"/");
    }

    #[test]
    fn a_host_that_is_not_uri_host_and_port_is_400_rfc9112_3_2_rfc3986_3_2_2() {
        for bad in [
            &b"../../etc/x y"[..],
            b"..",
            b"a..b",
            b"a/b",
            b"a\\b",
            b"a b",
            b"a:b",
            b"a:80:80",
            b":80",
            b"u@a",
            b"a%2",
            b"a%zz",
            b"[::1",
            b"[::1]x",
            b"[::g]",
            b"[1.2.3.4]",
            b"[v1]",
            b"a\"b",
            b"a<b>",
            b"a#b",
            b"\xc3\xa9.example",
        ] {
            let mut req = b"GET / HTTP/1.1\r\nHost: ".to_vec();
            req.extend_from_slice(bad);
            req.extend_from_slice(b"\r\n\r\n");
            assert_eq!(
                parse(&req).map(|o| o.map(|(_, n)| n)),
                Err(ParseError::BadHost),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
            let mut req = b"GET / HTTP/1.0\r\nHost: ".to_vec();
            req.extend_from_slice(bad);
            req.extend_from_slice(b"\r\n\r\n");
            assert_eq!(
                parse(&req).map(|o| o.map(|(_, n)| n)),
                Err(ParseError::BadHost)
            );
        }
        assert_eq!(ParseError::BadHost.status(), 400);
        for good in [
            &b""[..],
            b"example.com",
            b"Example.COM:8080",
            b"example.com.",
            b"a:",
            b"127.0.0.1:80",
            b"[::1]",
            b"[::ffff:1.2.3.4]:443",
            b"[v7.x:y]",
            b"xn--bcher-kva.example",
            b"a_b~c-d",
            b"%41b",
            b"a!$&'()*+,;=",
        ] {
            let mut req = b"GET / HTTP/1.1\r\nHost: ".to_vec();
            req.extend_from_slice(good);
            req.extend_from_slice(b"\r\n\r\n");
            let h = complete(&req);
            assert_eq!(h.host(), Some(good), "{:?}", String::from_utf8_lossy(good));
        }
    }

    #[test]
    fn a_reused_head_forgets_the_previous_request() {
        let mut h = RequestHead::default();
        let l = RequestLimits::default();
        h.parse(
            b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 9\r\nExpect: 100-continue\r\n\r\n",
            &l,
        )
        .unwrap();
        h.parse(b"GET /y HTTP/1.0\r\n\r\n", &l).unwrap();
        assert_eq!(h.target(), b"/y");
        assert_eq!(h.framing, Framing::None);
        assert!(!h.expect_continue);
        assert!(h.host().is_none());
        assert!(h.header("content-length").is_none());
    }
}
