//! HTTP/3 messages from decoded field sections: a request checked as RFC
//! 9114 §4.1.2, §4.2 and §4.3.1 require (anything else is malformed,
//! H3_MESSAGE_ERROR on its stream), a response's status, trailers, and
//! the content-length of a body against its DATA frames.

use crate::error::{Code, Error};
use crate::qpack::Fields;

fn malformed(why: &'static str) -> Error {
    Error::stream(Code::MessageError, why)
}

/// Fields HTTP/3 forbids (RFC 9114 §4.2); `te` is allowed only as
/// "trailers".
fn connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
    )
}

/// A field name HTTP/3 accepts: a token with no uppercase (§4.2).
fn name_ok(name: &[u8]) -> bool {
    !name.is_empty()
        && name.iter().all(|&b| {
            matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'!' | b'#' | b'$' | b'%' | b'&' | b'\''
                | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
        })
}

/// A field value without NUL, CR, LF, nor leading or trailing whitespace
/// (RFC 9114 §4.2, RFC 9110 §5.5).
fn value_ok(v: &[u8]) -> bool {
    !v.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n'))
        && !matches!(v.first(), Some(b' ' | b'\t'))
        && !matches!(v.last(), Some(b' ' | b'\t'))
}

/// Checks a regular (non-pseudo) field.
fn regular(name: &[u8], value: &[u8]) -> Result<(), Error> {
    if name.first() == Some(&b':') {
        return Err(malformed("a pseudo-header after a regular field"));
    }
    if !name_ok(name) {
        return Err(malformed("a field name with uppercase or non-token bytes"));
    }
    if !value_ok(value) {
        return Err(malformed(
            "a field value with NUL, CR, LF or edge whitespace",
        ));
    }
    if connection_specific(name) {
        return Err(malformed("a connection-specific field"));
    }
    if name == b"te" && value != b"trailers" {
        return Err(malformed("te other than \"trailers\""));
    }
    Ok(())
}

/// A request head: its decoded fields and where the pseudo-headers are.
#[derive(Debug, Clone)]
pub struct Request {
    fields: Fields,
    method: usize,
    scheme: Option<usize>,
    authority: Option<usize>,
    path: Option<usize>,
    /// Index of the first regular field.
    regular: usize,
    content_length: Option<u64>,
}

impl Request {
    /// Checks a decoded request section (RFC 9114 §4.3.1): the
    /// pseudo-headers first, each once, only the request ones; `:method`;
    /// `:scheme` and a non-empty `:path` unless CONNECT (which has
    /// `:authority` and neither); an authority (`:authority` or `host`)
    /// for http and https, the same in both when both are there; then
    /// regular fields as `regular` checks them, and one content-length.
    pub fn from_fields(fields: Fields) -> Result<Request, Error> {
        let mut method = None;
        let mut scheme = None;
        let mut authority = None;
        let mut path = None;
        let mut regular_at = fields.len();
        for (i, (name, value)) in fields.iter().enumerate() {
            if name.first() != Some(&b':') {
                regular_at = i;
                break;
            }
            let slot = match name {
                b":method" => &mut method,
                b":scheme" => &mut scheme,
                b":authority" => &mut authority,
                b":path" => &mut path,
                _ => return Err(malformed("an unknown or response pseudo-header")),
            };
            if slot.replace(i).is_some() {
                return Err(malformed("a pseudo-header twice"));
            }
            if !value_ok(value) {
                return Err(malformed("a pseudo-header value with NUL, CR or LF"));
            }
        }
        let mut content_length = None;
        let mut host = None;
        for (name, value) in fields.iter().skip(regular_at) {
            regular(name, value)?;
            if name == b"content-length" {
                let n = parse_length(value).ok_or(malformed("a content-length not a number"))?;
                if content_length.is_some_and(|c| c != n) {
                    return Err(malformed("two different content-lengths"));
                }
                content_length = Some(n);
            } else if name == b"host" {
                if host.is_some() {
                    return Err(malformed("two host fields"));
                }
                host = Some(value);
            }
        }
        let method = method.ok_or(malformed("no :method"))?;
        let get = |i: Option<usize>| i.and_then(|i| fields.get(i)).map(|(_, v)| v);
        let is_connect = get(Some(method)) == Some(b"CONNECT");
        if get(Some(method)).is_some_and(|m| m.is_empty()) {
            return Err(malformed("an empty :method"));
        }
        if is_connect {
            if scheme.is_some() || path.is_some() || authority.is_none() {
                return Err(malformed("CONNECT with :scheme or :path, or no :authority"));
            }
        } else {
            let s = get(scheme).ok_or(malformed("no :scheme"))?;
            if get(path).is_none_or(|p| p.is_empty()) {
                return Err(malformed("no :path, or an empty one"));
            }
            if matches!(s, b"http" | b"https") {
                let a = get(authority);
                if a.is_some_and(|a| a.is_empty()) || host.is_some_and(|h| h.is_empty()) {
                    return Err(malformed("an empty :authority or host"));
                }
                match (a, host) {
                    (None, None) => return Err(malformed("no :authority nor host")),
                    (Some(a), Some(h)) if a != h => {
                        return Err(malformed(":authority and host differ"))
                    }
                    _ => {}
                }
            }
        }
        Ok(Request {
            fields,
            method,
            scheme,
            authority,
            path,
            regular: regular_at,
            content_length,
        })
    }

    fn at(&self, i: Option<usize>) -> Option<&[u8]> {
        self.fields.get(i?).map(|(_, v)| v)
    }

    pub fn method(&self) -> &[u8] {
        self.at(Some(self.method)).unwrap_or_default()
    }

    pub fn scheme(&self) -> Option<&[u8]> {
        self.at(self.scheme)
    }

    pub fn authority(&self) -> Option<&[u8]> {
        self.at(self.authority)
    }

    pub fn path(&self) -> Option<&[u8]> {
        self.at(self.path)
    }

    /// The regular fields, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.fields.iter().skip(self.regular)
    }

    /// The content-length, when the request has one.
    pub fn content_length(&self) -> Option<u64> {
        self.content_length
    }

    /// Gives the field buffer back (to reuse).
    pub fn into_fields(self) -> Fields {
        self.fields
    }
}

/// Decimal digits only, no overflow.
fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// Checks trailers (RFC 9114 §4.1.2: no pseudo-headers; §4.2 as any
/// field).
pub fn check_trailers(fields: &Fields) -> Result<(), Error> {
    fields.iter().try_for_each(|(n, v)| regular(n, v))
}

/// A response's status (RFC 9114 §4.3.2): `:status` first and only, three
/// digits; then regular fields.
pub fn response_status(fields: &Fields) -> Result<u16, Error> {
    let mut status = None;
    for (name, value) in fields.iter() {
        if name.first() == Some(&b':') {
            if name != b":status" || status.is_some() {
                return Err(malformed("a pseudo-header other than one :status"));
            }
            if value.len() != 3 || !value.iter().all(u8::is_ascii_digit) {
                return Err(malformed("a :status not three digits"));
            }
            status = Some(
                value
                    .iter()
                    .fold(0u16, |n, &b| n * 10 + u16::from(b - b'0')),
            );
        } else {
            if status.is_none() {
                return Err(malformed("a field before :status"));
            }
            regular(name, value)?;
        }
    }
    status.ok_or(malformed("no :status"))
}

/// The length of a message body against its content-length (RFC 9114
/// §4.1.2: a body longer or shorter is malformed).
#[derive(Debug, Clone, Copy, Default)]
pub struct BodyLength {
    expected: Option<u64>,
    seen: u64,
}

impl BodyLength {
    pub fn new(expected: Option<u64>) -> BodyLength {
        BodyLength { expected, seen: 0 }
    }

    /// Bytes of DATA so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// `n` more bytes of DATA arrived.
    pub fn data(&mut self, n: usize) -> Result<(), Error> {
        self.seen += n as u64;
        if self.expected.is_some_and(|e| self.seen > e) {
            return Err(malformed("more DATA than the content-length"));
        }
        Ok(())
    }

    /// The body ended.
    pub fn end(&self) -> Result<(), Error> {
        if self.expected.is_some_and(|e| self.seen != e) {
            return Err(malformed("less DATA than the content-length"));
        }
        Ok(())
    }
}
