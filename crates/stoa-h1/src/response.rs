//! Response heads: encoding (server side) and parsing with body framing
//! (client side: the proxy and the load generator).

use crate::{eq_ignore_case, list_items, parse_u64, push_u64, trim, Framing, Version};
use std::ops::Range;

/// The reason phrase for a status code (RFC 9110 §15). Clients ignore it,
/// but people read it in logs and captures.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// Appends `HTTP/1.1 200 OK\r\n`. Stoa answers every request as HTTP/1.1,
/// the highest version it supports (RFC 9110 §2.5).
pub fn push_status_line(buf: &mut Vec<u8>, status: u16) {
    // The statuses of nearly every static response, as one copy each.
    match status {
        200 => return buf.extend_from_slice(b"HTTP/1.1 200 OK\r\n"),
        304 => return buf.extend_from_slice(b"HTTP/1.1 304 Not Modified\r\n"),
        _ => {}
    }
    buf.extend_from_slice(b"HTTP/1.1 ");
    push_u64(buf, u64::from(status));
    buf.push(b' ');
    buf.extend_from_slice(reason_phrase(status).as_bytes());
    buf.extend_from_slice(b"\r\n");
}

/// Appends `Name: value\r\n`.
pub fn push_header(buf: &mut Vec<u8>, name: &str, value: &[u8]) {
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b": ");
    buf.extend_from_slice(value);
    buf.extend_from_slice(b"\r\n");
}

/// Whether a response to `method`/`status` carries no body whatever its
/// headers say (RFC 9112 §6.3 items 1 and 2).
pub fn bodyless(is_head: bool, status: u16) -> bool {
    is_head || (100..200).contains(&status) || status == 204 || status == 304
}

/// A parsed response head (client side).
#[derive(Debug, Clone, Default)]
pub struct ResponseHead {
    buf: Vec<u8>,
    pub status: u16,
    pub version: Option<Version>,
    headers: Vec<(Range<usize>, Range<usize>)>,
}

/// Why a response head was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseError {
    Malformed,
    TooLarge,
    /// Content-Length and Transfer-Encoding disagree, or chunked not last.
    BadFraming,
}

impl ResponseHead {
    /// Parses a response head from the start of `input`; `Ok(None)` means
    /// more bytes are needed, `Ok(Some(n))` gives the head's length.
    pub fn parse(&mut self, input: &[u8], max_head: usize) -> Result<Option<usize>, ResponseError> {
        // Uninitialized: filling 100 empty headers (3.2 KB) before each
        // parse cost more than parsing a small head (callgrind).
        let mut storage = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() };
            crate::request::MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut resp,
            input,
            &mut storage,
        );
        let n = match parsed {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                return if input.len() > max_head {
                    Err(ResponseError::TooLarge)
                } else {
                    Ok(None)
                };
            }
            Err(httparse::Error::TooManyHeaders) => return Err(ResponseError::TooLarge),
            Err(_) => return Err(ResponseError::Malformed),
        };
        if n > max_head {
            return Err(ResponseError::TooLarge);
        }
        let base = &input[..n];
        self.buf.clear();
        self.buf.extend_from_slice(base);
        self.status = resp.code.ok_or(ResponseError::Malformed)?;
        self.version = match resp.version {
            Some(0) => Some(Version::Http10),
            Some(1) => Some(Version::Http11),
            _ => None,
        };
        self.headers.clear();
        for h in resp.headers.iter() {
            let ns = h.name.as_ptr() as usize - base.as_ptr() as usize;
            let v = trim(h.value);
            let vs = v.as_ptr() as usize - base.as_ptr() as usize;
            self.headers.push((ns..ns + h.name.len(), vs..vs + v.len()));
        }
        Ok(Some(n))
    }

    /// The head's bytes as parsed, status line to the blank line.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Bytes this head holds allocated, for a caller that keeps one to
    /// parse into again.
    pub fn allocated(&self) -> usize {
        self.buf.capacity()
            + self.headers.capacity() * std::mem::size_of::<(Range<usize>, Range<usize>)>()
    }

    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| eq_ignore_case(&self.buf[n.clone()], name.as_bytes()))
            .map(|(_, v)| &self.buf[v.clone()])
    }

    /// Every header in order.
    pub fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> + Clone {
        self.headers
            .iter()
            .map(|(n, v)| (&self.buf[n.clone()], &self.buf[v.clone()]))
    }

    /// The body framing of this response to a request with method HEAD
    /// (`is_head`) or not (RFC 9112 §6.3).
    pub fn framing(&self, is_head: bool) -> Result<Framing, ResponseError> {
        if bodyless(is_head, self.status) {
            return Ok(Framing::None);
        }
        let mut chunked = None;
        let mut length: Option<u64> = None;
        for (name, value) in self.headers() {
            if eq_ignore_case(name, b"transfer-encoding") {
                // Chunked must be the final coding; otherwise the body runs
                // to the close (§6.3 item 4, response side).
                chunked = Some(
                    list_items(value)
                        .last()
                        .is_some_and(|c| eq_ignore_case(c, b"chunked")),
                );
            } else if eq_ignore_case(name, b"content-length") {
                for item in value.split(|&b| b == b',') {
                    let n = parse_u64(trim(item)).ok_or(ResponseError::BadFraming)?;
                    if length.is_some_and(|l| l != n) {
                        return Err(ResponseError::BadFraming);
                    }
                    length = Some(n);
                }
            }
        }
        Ok(match (chunked, length) {
            (Some(true), _) => Framing::Chunked,
            (Some(false), _) => Framing::Close,
            (None, Some(0)) => Framing::None,
            (None, Some(n)) => Framing::Length(n),
            (None, None) => Framing::Close,
        })
    }

    /// Whether the server lets the connection be reused.
    pub fn keep_alive(&self) -> bool {
        let mut close = false;
        let mut keep = false;
        for (name, value) in self.headers() {
            if eq_ignore_case(name, b"connection") {
                for t in list_items(value) {
                    close |= eq_ignore_case(t, b"close");
                    keep |= eq_ignore_case(t, b"keep-alive");
                }
            }
        }
        match self.version {
            Some(Version::Http11) => !close,
            _ => keep && !close,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pre-encoded lines of 200 and 304 say what the general path
    /// (number and reason phrase) says.
    #[test]
    fn the_common_status_lines_match_the_general_encoding() {
        for status in [200u16, 304] {
            let mut fast = Vec::new();
            push_status_line(&mut fast, status);
            let general = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
            assert_eq!(fast, general.as_bytes());
        }
    }

    #[test]
    fn status_line_and_headers_are_encoded() {
        let mut b = Vec::new();
        push_status_line(&mut b, 404);
        push_header(&mut b, "Content-Length", b"0");
        assert_eq!(b, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n");
    }

    #[test]
    fn response_framing_follows_rfc9112_6_3() {
        let mut h = ResponseHead::default();
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n";
        assert_eq!(h.parse(wire, 8192), Ok(Some(wire.len())));
        assert_eq!(h.framing(false), Ok(Framing::Length(12)));
        assert_eq!(h.framing(true), Ok(Framing::None));
        assert!(h.keep_alive());

        h.parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n",
            8192,
        )
        .unwrap();
        assert_eq!(h.framing(false), Ok(Framing::Chunked));

        h.parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            8192,
        )
        .unwrap();
        assert_eq!(h.framing(false), Ok(Framing::Close));

        h.parse(b"HTTP/1.0 200 OK\r\n\r\n", 8192).unwrap();
        assert_eq!(h.framing(false), Ok(Framing::Close));
        assert!(!h.keep_alive());

        h.parse(
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n",
            8192,
        )
        .unwrap();
        assert_eq!(h.framing(false), Ok(Framing::None));

        h.parse(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            8192,
        )
        .unwrap();
        assert_eq!(h.framing(false), Err(ResponseError::BadFraming));
    }

    #[test]
    fn a_response_head_split_at_every_byte_is_partial_until_complete() {
        let wire = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok";
        let head = wire.len() - 2;
        let mut h = ResponseHead::default();
        for cut in 0..head {
            assert_eq!(h.parse(&wire[..cut], 8192), Ok(None), "cut {cut}");
        }
        assert_eq!(h.parse(wire, 8192), Ok(Some(head)));
        assert!(h.keep_alive());
        assert_eq!(h.status, 200);
        assert_eq!(h.header("content-length"), Some(&b"2"[..]));
    }

    #[test]
    fn garbage_is_not_a_response() {
        let mut h = ResponseHead::default();
        assert_eq!(
            h.parse(b"HTTX/1.1 200 OK\r\n\r\n", 8192),
            Err(ResponseError::Malformed)
        );
        assert_eq!(h.parse(&[b'a'; 100], 50), Err(ResponseError::Malformed));
        assert_eq!(
            h.parse(b"HTTP/1.1 200 OK\r\nX: aaaaaaaaaaaaaaa", 20),
            Err(ResponseError::TooLarge)
        );
    }
}
