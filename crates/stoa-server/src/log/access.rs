//! Access-log lines: what a line may say of a request ([`Entry`]), and
//! the three ways of writing it ([`Format`]): the Combined Log Format
//! (nginx's and Apache's default, byte for byte as before), one JSON
//! object per line, and a template of named variables in the manner of
//! nginx's `log_format` ([`Template`]). Writing appends to a buffer and
//! allocates nothing.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use stoa_h1::RequestHead;

/// Where an access log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    Off,
    Stdout,
    File(PathBuf),
}

/// An access log: where it goes and how its lines look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLog {
    pub dest: Dest,
    pub format: Format,
}

impl AccessLog {
    pub const OFF: AccessLog = AccessLog {
        dest: Dest::Off,
        format: Format::Combined,
    };

    pub fn is_off(&self) -> bool {
        self.dest == Dest::Off
    }
}

/// How lines are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// `$remote_addr - $remote_user [$time_local] "$request" $status
    /// $body_bytes_sent "$http_referer" "$http_user_agent"`.
    Combined,
    /// One JSON object per line.
    Json,
    Template(Arc<Template>),
}

impl Format {
    /// `combined`, `json`, or a template with `$variables`.
    pub fn parse(s: &str) -> Result<Format, String> {
        match s {
            "combined" => Ok(Format::Combined),
            "json" => Ok(Format::Json),
            t if t.contains('$') => Ok(Format::Template(Arc::new(Template::parse(t)?))),
            t => Err(format!(
                "`{t}` is not a format: write \"combined\", \"json\" or a template with $variables"
            )),
        }
    }

    /// Whether lines need the request's duration (a clock read at its
    /// start and end); the Combined format does not.
    pub fn timed(&self) -> bool {
        match self {
            Format::Combined => false,
            Format::Json => true,
            Format::Template(t) => t.timed,
        }
    }
}

/// What an access-log line may say of one request. What only some
/// formats need is read from the head when they need it, so the Combined
/// format costs no more than it did.
pub struct Entry<'r> {
    pub peer: SocketAddr,
    /// The request line as the client sent it (HTTP/2: rebuilt), or as
    /// much of it as could be read.
    pub request_line: Cow<'r, [u8]>,
    /// The parsed head (None: it could not be parsed).
    pub head: Option<&'r RequestHead>,
    /// `HTTP/1.0`, `HTTP/1.1` or `HTTP/2.0`.
    pub protocol: &'r str,
    pub tls: bool,
    pub status: u16,
    /// Body bytes sent.
    pub body_bytes: u64,
    /// Head and body bytes sent.
    pub bytes_sent: u64,
    /// Body bytes received (the head's are added from `head`).
    pub body_received: u64,
    /// From the request's head to the log line (when the format is timed).
    pub request_time: Option<Duration>,
    /// The application's address and how long it took, for gateways.
    pub upstream_addr: Option<&'r str>,
    pub upstream_time: Option<Duration>,
    /// The user the access phase authenticated (`$remote_user`).
    pub user: Option<&'r str>,
    /// The response was sent whole; false when it was cut (the client
    /// left, the application failed or a send timed out).
    pub complete: bool,
    /// What the response cache did (None: the route is not cached, or the
    /// cache did not take part, as for a method it does not store).
    pub(crate) cache_status: Option<CacheStatus>,
}

/// What the response cache did with a request, as nginx's
/// `$upstream_cache_status` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CacheStatus {
    /// Served fresh from the cache.
    Hit,
    /// Not stored: fetched from the application.
    Miss,
    /// Stored but stale: fetched again (validation, if any, answered
    /// with a full response).
    Expired,
    /// Stale, served because the application failed (stale-if-error)
    /// or the request allowed it (max-stale).
    Stale,
    /// Stale, served while a background fetch refreshes it
    /// (stale-while-revalidate).
    Updating,
    /// Stale, made fresh again by a 304 from the application.
    Revalidated,
    /// A bypass rule matched: the application answered, nothing stored.
    Bypass,
}

impl CacheStatus {
    /// The word the log writes (nginx's spelling).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CacheStatus::Hit => "HIT",
            CacheStatus::Miss => "MISS",
            CacheStatus::Expired => "EXPIRED",
            CacheStatus::Stale => "STALE",
            CacheStatus::Updating => "UPDATING",
            CacheStatus::Revalidated => "REVALIDATED",
            CacheStatus::Bypass => "BYPASS",
        }
    }
}

impl<'r> Entry<'r> {
    /// A request field by lowercase name.
    fn header(&self, name: &str) -> Option<&'r [u8]> {
        self.head.and_then(|h| h.header(name))
    }

    fn method(&self) -> &'r str {
        self.head.map_or("", |h| h.method.as_str())
    }

    fn target(&self) -> &'r [u8] {
        self.head.map_or(b"", |h| h.target())
    }

    /// Head and body bytes received (`$request_length`).
    fn bytes_received(&self) -> u64 {
        self.head.map_or(self.request_line.len(), |h| h.head_len()) as u64 + self.body_received
    }
}

/// The time texts of the current second.
pub struct Times<'a> {
    /// `26/Nov/2026:14:01:44 +0000`
    pub clf: &'a str,
    /// `2026-11-26T14:01:44+00:00`
    pub iso: &'a str,
    /// Seconds since the epoch, for `$msec`.
    pub now: Duration,
}

/// A `log_format` template, parsed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
    timed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(Vec<u8>),
    Var(Var),
}

/// The template variables; each is nginx's variable of the same name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Var {
    RemoteAddr,
    RemotePort,
    RemoteUser,
    TimeLocal,
    TimeIso8601,
    Msec,
    Request,
    RequestMethod,
    RequestUri,
    ServerProtocol,
    Scheme,
    Https,
    Status,
    BodyBytesSent,
    BytesSent,
    RequestLength,
    RequestTime,
    UpstreamAddr,
    UpstreamResponseTime,
    UpstreamCacheStatus,
    RequestCompletion,
    /// `$http_NAME`: a request header, `_` read as `-`.
    Header(String),
}

/// Every variable a template may name (for docs and errors).
pub const VARIABLES: &[&str] = &[
    "remote_addr",
    "remote_port",
    "remote_user",
    "time_local",
    "time_iso8601",
    "msec",
    "request",
    "request_method",
    "request_uri",
    "server_protocol",
    "scheme",
    "https",
    "status",
    "body_bytes_sent",
    "bytes_sent",
    "request_length",
    "request_time",
    "upstream_addr",
    "upstream_response_time",
    "upstream_cache_status",
    "request_completion",
    "http_NAME",
];

impl Var {
    fn named(name: &str) -> Option<Var> {
        Some(match name {
            "remote_addr" => Var::RemoteAddr,
            "remote_port" => Var::RemotePort,
            "remote_user" => Var::RemoteUser,
            "time_local" => Var::TimeLocal,
            "time_iso8601" => Var::TimeIso8601,
            "msec" => Var::Msec,
            "request" => Var::Request,
            "request_method" => Var::RequestMethod,
            "request_uri" => Var::RequestUri,
            "server_protocol" => Var::ServerProtocol,
            "scheme" => Var::Scheme,
            "https" => Var::Https,
            "status" => Var::Status,
            "body_bytes_sent" => Var::BodyBytesSent,
            "bytes_sent" => Var::BytesSent,
            "request_length" => Var::RequestLength,
            "request_time" => Var::RequestTime,
            "upstream_addr" => Var::UpstreamAddr,
            "upstream_response_time" => Var::UpstreamResponseTime,
            "upstream_cache_status" => Var::UpstreamCacheStatus,
            "request_completion" => Var::RequestCompletion,
            // nginx's own aliases for the two Combined fields.
            "host" => Var::Header("host".into()),
            n => match n.strip_prefix("http_") {
                Some(h) if !h.is_empty() => Var::Header(h.replace('_', "-")),
                _ => return None,
            },
        })
    }
}

impl Template {
    /// `$name` or `${name}` are variables (a name is letters, digits and
    /// `_`); `$$` is a dollar sign; everything else is text.
    pub fn parse(s: &str) -> Result<Template, String> {
        let b = s.as_bytes();
        let mut parts = Vec::new();
        let mut text = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] != b'$' {
                text.push(b[i]);
                i += 1;
                continue;
            }
            if b.get(i + 1) == Some(&b'$') {
                text.push(b'$');
                i += 2;
                continue;
            }
            let (name, next) = if b.get(i + 1) == Some(&b'{') {
                let end = s[i + 2..]
                    .find('}')
                    .ok_or_else(|| format!("`${{` without its `}}` at byte {i}"))?;
                (&s[i + 2..i + 2 + end], i + 3 + end)
            } else {
                let end = s[i + 1..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map_or(s.len(), |e| i + 1 + e);
                (&s[i + 1..end], end)
            };
            let var = Var::named(&name.to_ascii_lowercase()).ok_or_else(|| {
                format!(
                    "unknown variable `${name}` (known: {})",
                    VARIABLES
                        .iter()
                        .map(|v| format!("${v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            if !text.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut text)));
            }
            parts.push(Part::Var(var));
            i = next;
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        let timed = parts.iter().any(|p| {
            matches!(
                p,
                Part::Var(Var::RequestTime | Var::UpstreamResponseTime | Var::Msec)
            )
        });
        Ok(Template { parts, timed })
    }
}

/// Appends one line (with its newline) for `e` to `out`.
pub fn write_line(out: &mut Vec<u8>, format: &Format, e: &Entry<'_>, t: &Times<'_>) {
    match format {
        Format::Combined => combined(out, e, t),
        Format::Json => json(out, e, t),
        Format::Template(tpl) => template(out, tpl, e, t),
    }
    out.push(b'\n');
}

fn combined(out: &mut Vec<u8>, e: &Entry<'_>, t: &Times<'_>) {
    write_combined(
        out,
        &Combined {
            peer: e.peer,
            request_line: &e.request_line,
            spoken: None,
            status: e.status,
            body_bytes: e.body_bytes,
            head: e.head,
            user: e.user,
        },
        t.clf,
    );
}

/// What the Combined format prints, borrowed where it lies: the default
/// format is on every request's path, and building a whole [`Entry`]
/// (and reading the fields it does not print) cost it about a hundred
/// instructions a line.
pub struct Combined<'r> {
    pub peer: SocketAddr,
    /// The request line as the client sent it, or as much of it as could
    /// be read; with `spoken`, the HTTP/1.1 line the head was built as.
    pub request_line: &'r [u8],
    /// The client spoke HTTP/2 or HTTP/3: the line ends with this
    /// (`HTTP/2.0`, `HTTP/3.0`) instead of `HTTP/1.1` (escaping is byte by
    /// byte, so the two parts are written one after the other, with no
    /// copy of the line).
    pub spoken: Option<&'static str>,
    pub status: u16,
    /// Body bytes sent.
    pub body_bytes: u64,
    /// The parsed head (None: it could not be parsed).
    pub head: Option<&'r RequestHead>,
    /// The authenticated user (the third field; `-` without one).
    pub user: Option<&'r str>,
}

/// Appends the Combined line for `c` (with its newline) to `out`; `clf`
/// is the current second as `$time_local`.
pub fn write_combined_line(out: &mut Vec<u8>, c: &Combined<'_>, clf: &str) {
    write_combined(out, c, clf);
    out.push(b'\n');
}

#[inline]
fn write_combined(out: &mut Vec<u8>, c: &Combined<'_>, clf: &str) {
    push_ip(out, c.peer);
    match c.user {
        None => out.extend_from_slice(b" - - ["),
        Some(u) => {
            out.extend_from_slice(b" - ");
            // An empty user prints as nginx prints an empty value.
            if u.is_empty() {
                out.push(b'-');
            }
            escape_into(out, u.as_bytes());
            out.extend_from_slice(b" [");
        }
    }
    out.extend_from_slice(clf.as_bytes());
    out.extend_from_slice(b"] \"");
    if let Some(v) = c.spoken {
        let line = c.request_line;
        escape_into(out, line.strip_suffix(b"HTTP/1.1").unwrap_or(line));
        out.extend_from_slice(v.as_bytes());
    } else {
        escape_into(out, c.request_line);
    }
    out.extend_from_slice(b"\" ");
    stoa_h1::push_u64(out, u64::from(c.status));
    out.push(b' ');
    if c.body_bytes == 0 {
        out.push(b'-');
    } else {
        stoa_h1::push_u64(out, c.body_bytes);
    }
    let (referer, agent) = match c.head {
        Some(h) => referer_and_agent(h),
        None => (None, None),
    };
    out.extend_from_slice(b" \"");
    escape_into(out, referer.unwrap_or(b"-"));
    out.extend_from_slice(b"\" \"");
    escape_into(out, agent.unwrap_or(b"-"));
    out.push(b'"');
}

/// The first Referer and User-Agent values, in one pass over the fields
/// (two [`RequestHead::header`] calls cost twice the walk and a
/// case-folding compare of both sides).
fn referer_and_agent(h: &RequestHead) -> (Option<&[u8]>, Option<&[u8]>) {
    let (mut referer, mut agent) = (None, None);
    for (name, value) in h.headers() {
        match name.len() {
            7 if referer.is_none() && named(name, b"referer") => referer = Some(value),
            10 if agent.is_none() && named(name, b"user-agent") => agent = Some(value),
            _ => continue,
        }
        if referer.is_some() && agent.is_some() {
            break;
        }
    }
    (referer, agent)
}

/// Whether field name `name` is `lower` (lowercase letters and `-`, of
/// the same length) in any case. `| 0x20` folds only `name`'s side: for a
/// letter it is the lowercase one, and the only other byte it maps to a
/// letter or `-` is CR, which a parsed field name cannot hold.
#[inline]
fn named(name: &[u8], lower: &[u8]) -> bool {
    name.iter().zip(lower).all(|(&a, &b)| a | 0x20 == b)
}

fn json(out: &mut Vec<u8>, e: &Entry<'_>, t: &Times<'_>) {
    out.extend_from_slice(b"{\"time\":\"");
    out.extend_from_slice(t.iso.as_bytes());
    out.extend_from_slice(b"\",\"remote_addr\":\"");
    push_ip(out, e.peer);
    out.extend_from_slice(b"\",\"remote_port\":");
    stoa_h1::push_u64(out, u64::from(e.peer.port()));
    out.extend_from_slice(b",\"remote_user\":");
    match e.user {
        Some(u) => json_str(out, u.as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"request\":");
    json_str(out, &e.request_line);
    out.extend_from_slice(b",\"method\":");
    json_str(out, e.method().as_bytes());
    out.extend_from_slice(b",\"uri\":");
    json_str(out, e.target());
    out.extend_from_slice(b",\"protocol\":");
    json_str(out, e.protocol.as_bytes());
    out.extend_from_slice(if e.tls {
        b",\"tls\":true"
    } else {
        b",\"tls\":false"
    });
    out.extend_from_slice(b",\"status\":");
    stoa_h1::push_u64(out, u64::from(e.status));
    out.extend_from_slice(b",\"body_bytes_sent\":");
    stoa_h1::push_u64(out, e.body_bytes);
    out.extend_from_slice(b",\"bytes_sent\":");
    stoa_h1::push_u64(out, e.bytes_sent);
    out.extend_from_slice(b",\"request_length\":");
    stoa_h1::push_u64(out, e.bytes_received());
    out.extend_from_slice(b",\"request_time\":");
    match e.request_time {
        Some(d) => push_secs(out, d),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"upstream_addr\":");
    match e.upstream_addr {
        Some(a) => json_str(out, a.as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"upstream_response_time\":");
    match e.upstream_time {
        Some(d) => push_secs(out, d),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"upstream_cache_status\":");
    match e.cache_status {
        Some(c) => {
            out.push(b'"');
            out.extend_from_slice(c.as_str().as_bytes());
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(if e.complete {
        b",\"complete\":true"
    } else {
        b",\"complete\":false"
    });
    for (key, name) in [
        ("host", "host"),
        ("referer", "referer"),
        ("user_agent", "user-agent"),
    ] {
        out.extend_from_slice(b",\"");
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\":");
        match e.header(name) {
            Some(v) => json_str(out, v),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.push(b'}');
}

fn template(out: &mut Vec<u8>, tpl: &Template, e: &Entry<'_>, t: &Times<'_>) {
    for p in &tpl.parts {
        let v = match p {
            Part::Text(s) => {
                out.extend_from_slice(s);
                continue;
            }
            Part::Var(v) => v,
        };
        // nginx writes an empty or missing value as `-`.
        let start = out.len();
        match v {
            Var::RemoteAddr => push_ip(out, e.peer),
            Var::RemotePort => stoa_h1::push_u64(out, u64::from(e.peer.port())),
            Var::RemoteUser => {
                if let Some(u) = e.user {
                    escape_into(out, u.as_bytes())
                }
            }
            Var::TimeLocal => out.extend_from_slice(t.clf.as_bytes()),
            Var::TimeIso8601 => out.extend_from_slice(t.iso.as_bytes()),
            Var::Msec => push_secs(out, t.now),
            Var::Request => escape_into(out, &e.request_line),
            Var::RequestMethod => escape_into(out, e.method().as_bytes()),
            Var::RequestUri => escape_into(out, e.target()),
            Var::ServerProtocol => out.extend_from_slice(e.protocol.as_bytes()),
            Var::Scheme => out.extend_from_slice(if e.tls { b"https" } else { b"http" }),
            Var::Https => {
                if e.tls {
                    out.extend_from_slice(b"on");
                }
            }
            Var::Status => stoa_h1::push_u64(out, u64::from(e.status)),
            Var::BodyBytesSent => stoa_h1::push_u64(out, e.body_bytes),
            Var::BytesSent => stoa_h1::push_u64(out, e.bytes_sent),
            Var::RequestLength => stoa_h1::push_u64(out, e.bytes_received()),
            Var::RequestTime => {
                if let Some(d) = e.request_time {
                    push_secs(out, d)
                }
            }
            Var::UpstreamAddr => {
                if let Some(a) = e.upstream_addr {
                    escape_into(out, a.as_bytes())
                }
            }
            Var::UpstreamResponseTime => {
                if let Some(d) = e.upstream_time {
                    push_secs(out, d)
                }
            }
            Var::UpstreamCacheStatus => {
                if let Some(c) = e.cache_status {
                    out.extend_from_slice(c.as_str().as_bytes())
                }
            }
            Var::RequestCompletion => {
                if e.complete {
                    out.extend_from_slice(b"OK");
                }
            }
            Var::Header(name) => {
                if let Some(v) = e.header(name) {
                    escape_into(out, v)
                }
            }
        }
        if out.len() == start {
            out.push(b'-');
        }
    }
}

/// The peer's address without its port. Not `write!`: `Display` for an
/// address goes through `core::fmt`'s padding, several hundred
/// instructions a line.
fn push_ip(out: &mut Vec<u8>, peer: SocketAddr) {
    match peer.ip() {
        std::net::IpAddr::V4(a) => stoa_h1::push_ipv4(out, a),
        ip => {
            use std::io::Write;
            let _ = write!(out, "{ip}");
        }
    }
}

/// Seconds with millisecond resolution, as nginx writes `$request_time`.
fn push_secs(out: &mut Vec<u8>, d: Duration) {
    let ms = d.as_millis();
    stoa_h1::push_u64(out, (ms / 1000) as u64);
    out.push(b'.');
    let frac = (ms % 1000) as u16;
    out.extend_from_slice(&[
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

/// Escapes bytes for a log field as nginx's `escape=default` does: `"`
/// and `\` and anything not printable ASCII become `\"`, `\\` or `\xHH`,
/// so a request cannot forge log lines.
pub fn escape_into(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(&[
                b'\\',
                b'x',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]),
        }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A JSON string (RFC 8259 §7) of bytes, quotes included: UTF-8 passes
/// as it is, control characters and `"` `\` are escaped, and a byte that
/// is not part of valid UTF-8 is written as `\u00HH`, the code point of
/// the same number (so every line stays valid JSON).
pub fn json_str(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for chunk in s.utf8_chunks() {
        for &b in chunk.valid().as_bytes() {
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0..=0x1f | 0x7f => push_u00(out, b),
                _ => out.push(b),
            }
        }
        for &b in chunk.invalid() {
            push_u00(out, b);
        }
    }
    out.push(b'"');
}

fn push_u00(out: &mut Vec<u8>, b: u8) {
    out.extend_from_slice(&[
        b'\\',
        b'u',
        b'0',
        b'0',
        HEX[(b >> 4) as usize],
        HEX[(b & 15) as usize],
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request head as parsed off the wire (87 bytes).
    fn head() -> &'static RequestHead {
        let raw: &[u8] = b"GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\nReferer: http://a/\"x\"\r\n\
                           User-Agent: curl/8 \xff\r\nX-Request-Id: abc\r\n\r\n";
        let mut h = RequestHead::default();
        let limits = stoa_h1::RequestLimits {
            max_head_bytes: 8192,
            max_uri_bytes: 8192,
        };
        assert!(matches!(h.parse(raw, &limits), Ok(Some(_))));
        Box::leak(Box::new(h))
    }

    fn entry() -> Entry<'static> {
        let head = head();
        Entry {
            peer: "192.0.2.7:5555".parse().expect("addr"),
            request_line: Cow::Borrowed(head.request_line()),
            head: Some(head),
            protocol: "HTTP/1.1",
            tls: true,
            status: 200,
            body_bytes: 1234,
            bytes_sent: 1400,
            body_received: 3,
            request_time: Some(Duration::from_micros(12_345)),
            upstream_addr: Some("unix:/run/php.sock"),
            upstream_time: Some(Duration::from_millis(11)),
            user: None,
            complete: true,
            cache_status: None,
        }
    }

    const T: Times<'static> = Times {
        clf: "26/Nov/2026:14:01:44 +0000",
        iso: "2026-11-26T14:01:44+00:00",
        now: Duration::from_millis(1_795_000_000_123),
    };

    fn line(f: &Format, e: &Entry<'_>) -> String {
        let mut v = Vec::new();
        write_line(&mut v, f, e, &T);
        String::from_utf8(v).expect("a log line is ASCII or UTF-8")
    }

    /// The Combined Log Format as nginx's predefined `combined` writes it.
    #[test]
    fn combined_is_nginx_combined_with_escapes() {
        assert_eq!(
            line(&Format::Combined, &entry()),
            "192.0.2.7 - - [26/Nov/2026:14:01:44 +0000] \"GET /a?b=1 HTTP/1.1\" 200 1234 \
             \"http://a/\\\"x\\\"\" \"curl/8 \\xff\"\n"
        );
        let mut e = entry();
        e.body_bytes = 0;
        assert!(line(&Format::Combined, &e).contains("\" 200 - \""));
    }

    /// The user basic authentication established fills the Combined
    /// format's third field (Apache's `%u`, nginx's `$remote_user`),
    /// escaped like every other field; JSON and templates name it.
    #[test]
    fn the_authenticated_user_is_the_third_field() {
        let mut e = entry();
        e.user = Some("alice \"x\"");
        assert!(line(&Format::Combined, &e)
            .starts_with("192.0.2.7 - alice \\\"x\\\" [26/Nov/2026:14:01:44 +0000] \"GET"));
        let v: serde_json::Value =
            serde_json::from_str(line(&Format::Json, &e).trim_end()).expect("json");
        assert_eq!(v["remote_user"], "alice \"x\"");
        let t = Format::parse("$remote_user|$remote_addr").expect("template");
        assert_eq!(line(&t, &e), "alice \\\"x\\\"|192.0.2.7\n");
        e.user = None;
        assert_eq!(line(&t, &e), "-|192.0.2.7\n");
        let v: serde_json::Value =
            serde_json::from_str(line(&Format::Json, &e).trim_end()).expect("json");
        assert!(v["remote_user"].is_null());
    }

    /// The Combined fast path (no [`Entry`]) writes what the Entry path
    /// writes: HTTP/2's line rebuilt while escaping, field names in any
    /// case, the first of repeated fields, `-` for absent ones.
    #[test]
    fn combined_fast_path_matches_the_entry_path() {
        let e = entry();
        let mut fast = Vec::new();
        let c = |spoken, line, head| Combined {
            peer: e.peer,
            request_line: line,
            spoken,
            status: e.status,
            body_bytes: e.body_bytes,
            head,
            user: None,
        };
        write_combined_line(&mut fast, &c(None, &e.request_line, e.head), T.clf);
        assert_eq!(fast, line(&Format::Combined, &e).into_bytes());

        fast.clear();
        write_combined_line(
            &mut fast,
            &c(Some("HTTP/2.0"), &e.request_line, e.head),
            T.clf,
        );
        let mut h2 = entry();
        h2.request_line = Cow::Borrowed(b"GET /a?b=1 HTTP/2.0");
        assert_eq!(fast, line(&Format::Combined, &h2).into_bytes());

        let raw: &[u8] =
            b"GET / HTTP/1.1\r\nHost: h\r\nuser-AGENT: a\r\nX-Referer: no\r\nUser-Agent: b\r\n\r\n";
        let mut h = RequestHead::default();
        let limits = stoa_h1::RequestLimits {
            max_head_bytes: 8192,
            max_uri_bytes: 8192,
        };
        assert!(matches!(h.parse(raw, &limits), Ok(Some(_))));
        fast.clear();
        write_combined_line(&mut fast, &c(None, h.request_line(), Some(&h)), T.clf);
        assert!(fast.ends_with(b"\"GET / HTTP/1.1\" 200 1234 \"-\" \"a\"\n"));
        fast.clear();
        write_combined_line(&mut fast, &c(None, b"GARBAGE", None), T.clf);
        assert!(fast.ends_with(b"\"GARBAGE\" 200 1234 \"-\" \"-\"\n"));
    }

    /// One object per line, parseable, every field of the docs there and
    /// typed; a newline or an invalid byte cannot break the line.
    #[test]
    fn json_lines_are_valid_json_with_every_field() {
        let l = line(&Format::Json, &entry());
        assert_eq!(l.matches('\n').count(), 1);
        let v: serde_json::Value = serde_json::from_str(l.trim_end()).expect("valid JSON");
        assert_eq!(v["time"], "2026-11-26T14:01:44+00:00");
        assert_eq!(v["remote_addr"], "192.0.2.7");
        assert_eq!(v["remote_port"], 5555);
        assert_eq!(v["request"], "GET /a?b=1 HTTP/1.1");
        assert_eq!(v["method"], "GET");
        assert_eq!(v["uri"], "/a?b=1");
        assert_eq!(v["protocol"], "HTTP/1.1");
        assert_eq!(v["tls"], true);
        assert_eq!(v["status"], 200);
        assert_eq!(v["body_bytes_sent"], 1234);
        assert_eq!(v["bytes_sent"], 1400);
        assert_eq!(v["request_length"], head().head_len() as u64 + 3);
        assert_eq!(v["request_time"], 0.012);
        assert_eq!(v["upstream_addr"], "unix:/run/php.sock");
        assert_eq!(v["upstream_response_time"], 0.011);
        assert_eq!(v["complete"], true);
        assert_eq!(v["host"], "example.com");
        assert_eq!(v["referer"], "http://a/\"x\"");
        assert_eq!(v["user_agent"], "curl/8 \u{ff}");
        let mut e = entry();
        e.upstream_addr = None;
        e.upstream_time = None;
        e.complete = false;
        let v: serde_json::Value =
            serde_json::from_str(line(&Format::Json, &e).trim_end()).expect("valid JSON");
        assert!(v["upstream_addr"].is_null());
        assert!(v["upstream_response_time"].is_null());
        assert_eq!(v["complete"], false);
    }

    #[test]
    fn json_strings_escape_controls_and_keep_utf8() {
        let mut v = Vec::new();
        json_str(&mut v, "é\u{1}\"\\\t".as_bytes());
        assert_eq!(v, "\"é\\u0001\\\"\\\\\\t\"".as_bytes());
    }

    /// nginx `log_format`: `$var` and `${var}`, `-` for an empty value,
    /// `$request_completion` "OK" or empty, `$http_x_request_id`.
    #[test]
    fn templates_write_named_variables_like_nginx_log_format() {
        let f = Format::parse(
            "$remote_addr:$remote_port $scheme $https [$time_iso8601] \"$request_method ${request_uri}\" \
             $server_protocol $status $body_bytes_sent/$bytes_sent in=$request_length t=$request_time \
             up=$upstream_addr ut=$upstream_response_time c=$request_completion id=$http_x_request_id \
             none=$http_x_none host=$host $$ $msec",
        )
        .expect("template");
        assert!(f.timed());
        let expected = format!(
            "192.0.2.7:5555 https on [2026-11-26T14:01:44+00:00] \"GET /a?b=1\" HTTP/1.1 200 \
             1234/1400 in={} t=0.012 up=unix:/run/php.sock ut=0.011 c=OK id=abc none=- \
             host=example.com $ 1795000000.123\n",
            head().head_len() + 3
        );
        assert_eq!(line(&f, &entry()), expected);
        let mut e = entry();
        e.complete = false;
        e.tls = false;
        let l = line(&f, &e);
        assert!(l.contains(" http - ["), "{l}");
        assert!(l.contains(" c=- "), "{l}");
    }

    /// `$upstream_cache_status` prints nginx's words (HIT, MISS, EXPIRED,
    /// STALE, UPDATING, REVALIDATED, BYPASS) and `-` on a route the cache
    /// did not take part in, as nginx prints an empty variable.
    #[test]
    fn upstream_cache_status_prints_nginx_words_and_a_dash_when_not_cached() {
        let f = Format::parse("$request_uri $upstream_cache_status|${upstream_cache_status}")
            .expect("template");
        let mut e = entry();
        for (s, word) in [
            (CacheStatus::Hit, "HIT"),
            (CacheStatus::Miss, "MISS"),
            (CacheStatus::Expired, "EXPIRED"),
            (CacheStatus::Stale, "STALE"),
            (CacheStatus::Updating, "UPDATING"),
            (CacheStatus::Revalidated, "REVALIDATED"),
            (CacheStatus::Bypass, "BYPASS"),
        ] {
            e.cache_status = Some(s);
            assert_eq!(line(&f, &e), format!("/a?b=1 {word}|{word}\n"));
        }
        e.cache_status = None;
        assert_eq!(line(&f, &e), "/a?b=1 -|-\n");
        // The Combined format is unchanged by it.
        e.cache_status = Some(CacheStatus::Hit);
        assert_eq!(
            line(&Format::Combined, &e),
            line(&Format::Combined, &entry())
        );
    }

    /// The JSON field `upstream_cache_status`: the word, or null when the
    /// route is not cached (as `upstream_addr` is null without a gateway).
    #[test]
    fn json_upstream_cache_status_is_the_word_or_null() {
        let mut e = entry();
        let v: serde_json::Value =
            serde_json::from_str(line(&Format::Json, &e).trim_end()).expect("valid JSON");
        assert!(v["upstream_cache_status"].is_null(), "{v}");
        e.cache_status = Some(CacheStatus::Revalidated);
        let v: serde_json::Value =
            serde_json::from_str(line(&Format::Json, &e).trim_end()).expect("valid JSON");
        assert_eq!(v["upstream_cache_status"], "REVALIDATED");
        assert_eq!(v["complete"], true);
    }

    #[test]
    fn templates_refuse_unknown_variables_and_plain_words() {
        let e = Format::parse("$remote_addr $nope").expect_err("unknown");
        assert!(e.contains("$nope") && e.contains("$request_time"), "{e}");
        assert!(Format::parse("${status").is_err());
        assert!(Format::parse("fancy").is_err());
        assert!(!Format::parse("$status").expect("ok").timed());
        assert_eq!(Format::parse("json"), Ok(Format::Json));
    }
}
