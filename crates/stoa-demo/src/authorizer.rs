//! A FastCGI Authorizer (FastCGI §6.3) for the demo's `/private/` route:
//! HTTP Basic with the user `demo` and the password `demo` gets through
//! (`Status: 200`, with `Variable-REMOTE_USER: demo` for whatever serves
//! the request next); anything else gets 401 with a `WWW-Authenticate`
//! challenge, which Stoa passes to the client as it is.
//!
//! The credentials are fixed and printed on the demo's pages: this shows
//! the Authorizer role, it protects nothing.

use stoa_fastcgi::app::blocking::{self, Output};
use stoa_fastcgi::app::{Request, Settings};
use stoa_fastcgi::Role;

use crate::Response;

pub const USER: &str = "demo";
pub const PASSWORD: &str = "demo";
const REALM: &str = "Stoa demo (user demo, password demo)";

/// Runs the Authorizer on fd 0.
pub fn run() -> Result<(), String> {
    let settings = Settings {
        roles: vec![Role::Authorizer],
        ..Settings::default()
    };
    blocking::run(settings, |req: &Request, out: &mut Output| {
        use std::io::Write;
        let resp = decide(req.param_bytes("HTTP_AUTHORIZATION"));
        u32::from(out.write_all(&resp.to_bytes()).is_err())
    })
    .map_err(|e| format!("authorizer: {e}"))
}

/// The answer to a request whose `Authorization` field is `authorization`.
pub fn decide(authorization: Option<&[u8]>) -> Response {
    if authorization.is_some_and(is_demo_user) {
        return Response {
            status: 200,
            headers: vec![("Variable-REMOTE_USER", USER.to_owned())],
            body: Vec::new(),
        };
    }
    Response::html(
        401,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Private - Stoa demo</title>\n<link rel=\"stylesheet\" href=\"/style.css\">\n\
         </head>\n<body>\n<h1>401: credentials needed</h1>\n\
         <p>This part of the demo is guarded by a FastCGI Authorizer. \
         Sign in as <code>demo</code> with the password <code>demo</code>.</p>\n\
         <p><a href=\"/\">Back to the demo</a></p>\n</body>\n</html>\n"
            .to_owned(),
    )
    .header(
        "WWW-Authenticate",
        format!("Basic realm=\"{REALM}\", charset=\"UTF-8\""),
    )
}

/// `Basic <base64 of demo:demo>` (RFC 7617; the scheme is compared
/// ignoring case).
fn is_demo_user(value: &[u8]) -> bool {
    let value = value.trim_ascii();
    let Some(space) = value.iter().position(|&b| b == b' ') else {
        return false;
    };
    let (scheme, token) = value.split_at(space);
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return false;
    }
    let expected = format!("{USER}:{PASSWORD}");
    base64_decode(token.trim_ascii()).is_some_and(|d| d == expected.as_bytes())
}

/// Standard base64 (RFC 4648 §4), padding optional; `None` when malformed.
fn base64_decode(s: &[u8]) -> Option<Vec<u8>> {
    let s = s
        .strip_suffix(b"==")
        .or_else(|| s.strip_suffix(b"="))
        .unwrap_or(s);
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in s {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = acc << 6 | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_demo_demo_gets_through_with_the_user_as_a_variable() {
        // base64("demo:demo") = ZGVtbzpkZW1v
        for h in [
            "Basic ZGVtbzpkZW1v",
            "basic  ZGVtbzpkZW1v ",
            "BASIC ZGVtbzpkZW1v",
        ] {
            let r = decide(Some(h.as_bytes()));
            assert_eq!(r.status, 200, "{h}");
            assert_eq!(r.header_value("variable-remote_user"), Some("demo"));
        }
    }

    #[test]
    fn anything_else_gets_401_with_a_basic_challenge() {
        // demo:wrong, demo:demo without the scheme, Bearer, garbage, none.
        for h in [
            Some(&b"Basic ZGVtbzp3cm9uZw=="[..]),
            Some(b"ZGVtbzpkZW1v"),
            Some(b"Bearer ZGVtbzpkZW1v"),
            Some(b"Basic !!!!"),
            Some(b"Basic ZGVtbzpkZW1vIA=="),
            None,
        ] {
            let r = decide(h);
            assert_eq!(r.status, 401, "{h:?}");
            let challenge = r.header_value("www-authenticate").unwrap_or("");
            assert!(challenge.starts_with("Basic realm=\""), "{challenge}");
        }
    }

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(
            base64_decode(b"ZGVtbzpkZW1v").as_deref(),
            Some(&b"demo:demo"[..])
        );
        assert_eq!(base64_decode(b"YQ==").as_deref(), Some(&b"a"[..]));
        assert_eq!(base64_decode(b"YWI").as_deref(), Some(&b"ab"[..]));
        assert_eq!(base64_decode(b"Y"), None);
    }
}
