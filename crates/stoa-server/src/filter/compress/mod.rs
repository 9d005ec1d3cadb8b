//! `compress`: gzip, brotli and zstd on the fly, for every handler's
//! output — nginx's `gzip` (and the brotli module), Caddy's `encode`.
//!
//! The head decides ([`Compress::head`], rules in [`Verdict`]); the body
//! then goes through an encoder ([`encoder`]), flushed whenever the
//! application flushes. A static file's compressed form is made once per
//! file version and kept ([`cache`]), where nginx and Caddy compress it
//! for every request.

mod cache;
mod config;
mod encoder;
mod negotiate;

pub(crate) use config::CompressSetting;

use super::{Filter, Head, Length};
use encoder::Compressing;

/// A content coding the server can apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Coding {
    Zstd = 0,
    Br = 1,
    Gzip = 2,
}

impl Coding {
    const COUNT: usize = 3;

    /// The token of `Content-Encoding` and `Accept-Encoding`.
    pub(crate) fn token(self) -> &'static str {
        match self {
            Coding::Zstd => "zstd",
            Coding::Br => "br",
            Coding::Gzip => "gzip",
        }
    }

    fn from_token(t: &[u8]) -> Option<Coding> {
        if t.eq_ignore_ascii_case(b"gzip") || t.eq_ignore_ascii_case(b"x-gzip") {
            Some(Coding::Gzip)
        } else if t.eq_ignore_ascii_case(b"br") {
            Some(Coding::Br)
        } else if t.eq_ignore_ascii_case(b"zstd") {
            Some(Coding::Zstd)
        } else {
            None
        }
    }
}

/// A route's `compress`, validated.
#[derive(Debug, Clone)]
pub(crate) struct Compress {
    /// Offered codings, the server's preference first.
    codings: Vec<Coding>,
    /// Media types compressed: `text/html`, `text/*`, `application/*+xml`
    /// (lowercase).
    types: Vec<Box<str>>,
    /// Bodies announced shorter than this are sent as they are.
    min_length: u64,
    gzip_level: u32,
    brotli_level: u32,
    zstd_level: i32,
}

/// What the rules say of one response.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Not a candidate at all: no `Vary` either (its representation does
    /// not depend on `Accept-Encoding`).
    Untouched,
    /// A compressible response sent as it is (too short, a client that
    /// takes no offered coding, HTTP/1.0): it still varies.
    VaryOnly,
    /// Compressed with this coding.
    Encode(Coding),
}

impl Compress {
    fn level(&self, c: Coding) -> i32 {
        match c {
            Coding::Gzip => self.gzip_level as i32,
            Coding::Br => self.brotli_level as i32,
            Coding::Zstd => self.zstd_level,
        }
    }

    /// Whether a `Content-Type` is one of the configured media types.
    fn takes_type(&self, content_type: &[u8]) -> bool {
        let mt = content_type
            .split(|&b| b == b';')
            .next()
            .map(stoa_h1::trim)
            .unwrap_or(b"");
        let Ok(mt) = std::str::from_utf8(mt) else {
            return false;
        };
        let Some((top, sub)) = mt.split_once('/') else {
            return false;
        };
        self.types.iter().any(|pattern| {
            let Some((ptop, psub)) = pattern.split_once('/') else {
                return false;
            };
            if !ptop.eq_ignore_ascii_case(top) {
                return false;
            }
            match psub.strip_prefix('*') {
                // `*` alone: every subtype; `*+xml`: every structured
                // syntax suffix (RFC 6839).
                Some(suffix) => {
                    sub.len() >= suffix.len()
                        && sub[sub.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
                }
                None => psub.eq_ignore_ascii_case(sub),
            }
        })
    }

    /// The rules, in the order nginx's gzip filter and RFC 9110 give them.
    fn verdict(&self, h: &Head<'_>) -> Verdict {
        // 1xx never get here; 204 and 304 have no body (RFC 9110 §15.3.5,
        // §15.4.5); a 206 is a range of the identity's bytes (§14.1.1).
        if matches!(h.status, 204 | 206 | 304) || h.status < 200 || h.length == Length::Empty {
            return Verdict::Untouched;
        }
        let f = &h.fields;
        // Already encoded (a precompressed file, an application's gzip),
        // or a part of one: sent as it is.
        if f.has("content-encoding") || f.has("content-range") {
            return Verdict::Untouched;
        }
        // The sender forbids transformations (RFC 9111 §5.2.2.6).
        if f.has_token("cache-control", "no-transform") {
            return Verdict::Untouched;
        }
        match f.get("content-type") {
            Some(t) if self.takes_type(t) => {}
            _ => return Verdict::Untouched,
        }
        if let Length::Known(n) = h.length {
            if n < self.min_length {
                return Verdict::VaryOnly;
            }
        }
        // nginx's `gzip_http_version 1.1`: a streamed body to an HTTP/1.0
        // client could only be delimited by closing, and old proxies that
        // speak 1.0 mishandle Vary.
        if h.http10 {
            return Verdict::VaryOnly;
        }
        let Some(ae) = h.req.header("accept-encoding") else {
            return Verdict::VaryOnly;
        };
        match negotiate::choose(ae, &self.codings) {
            Some(c) => Verdict::Encode(c),
            None => Verdict::VaryOnly,
        }
    }
}

impl Filter for Compress {
    type Body = Compressing;
    const IN_SUBREQUESTS: bool = false;

    fn head(&self, h: &mut Head<'_>) -> Option<Compressing> {
        let coding = match self.verdict(h) {
            Verdict::Untouched => return None,
            Verdict::VaryOnly => {
                add_vary(h);
                return None;
            }
            Verdict::Encode(c) => c,
        };
        add_vary(h);
        let f = &mut h.fields;
        f.set("Content-Encoding", coding.token().as_bytes());
        // The length and ranges are the identity's; the tag is not: a
        // strong ETag promises the same bytes (RFC 9110 §8.8.1), and the
        // encoder's bytes are equivalent, not identical.
        f.remove("content-length");
        f.remove("accept-ranges");
        if let Some(tag) = f.get("etag") {
            if !tag.starts_with(b"W/") {
                let mut weak = b"W/".to_vec();
                weak.extend_from_slice(tag);
                f.set("ETag", &weak);
            }
        }
        let hint = match h.length {
            Length::Known(n) => Some(n),
            _ => None,
        };
        h.length = Length::Unknown;
        if h.head_only {
            return None;
        }
        Some(Compressing::new(coding, self.level(coding), hint))
    }
}

/// `Vary: Accept-Encoding`, unless the response says so already.
fn add_vary(h: &mut Head<'_>) {
    if !h.fields.has_token("vary", "accept-encoding") && !h.fields.has_token("vary", "*") {
        h.fields.append("Vary", b"Accept-Encoding");
    }
}

#[cfg(test)]
mod tests;
