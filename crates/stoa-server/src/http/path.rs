//! Request path normalization, done once before a path is mapped onto the
//! file system.
//!
//! The static handler joins the result of [`normalize`] to a document root,
//! so this function is the guard against directory traversal: it decodes
//! percent-escapes *first* and only then removes dot segments, so that
//! `%2e%2e` cannot sneak past as a literal name and later be interpreted as
//! `..` by the file system. Anything that could change meaning between the
//! URL and the file system (encoded slashes, backslashes, NUL, control
//! characters, invalid UTF-8) is refused instead of being guessed at.

/// Why a request path was refused. Every variant maps to 400 Bad Request
/// (or 404, if the caller prefers not to reveal why).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    /// The path does not start with '/': "*", absolute-form, or empty.
    NotAbsolute,
    /// A '%' not followed by two hexadecimal digits (RFC 3986 §2.1).
    BadPercentEncoding,
    /// `%2F`: a slash inside a segment cannot be represented on the file
    /// system, and accepting it would make "a%2Fb" and "a/b" the same file.
    EncodedSlash,
    /// A NUL byte, raw or `%00`: it would truncate the path at the C API.
    NulByte,
    /// A backslash, raw or `%5C`: a path separator on some systems.
    Backslash,
    /// Any other C0 control character or DEL, raw or encoded (incl. CR/LF,
    /// which could split a header if the path were echoed into one).
    ControlChar,
    /// The decoded bytes are not UTF-8.
    InvalidUtf8,
    /// A ".." segment would climb above the root.
    EscapesRoot,
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            PathError::NotAbsolute => "request path is not absolute",
            PathError::BadPercentEncoding => "bad percent-encoding in request path",
            PathError::EncodedSlash => "encoded slash in request path",
            PathError::NulByte => "NUL byte in request path",
            PathError::Backslash => "backslash in request path",
            PathError::ControlChar => "control character in request path",
            PathError::InvalidUtf8 => "request path is not valid UTF-8",
            PathError::EscapesRoot => "request path climbs above the root",
        };
        f.write_str(s)
    }
}

impl std::error::Error for PathError {}

/// Normalizes the path part of a request-target (the bytes before '?').
///
/// Percent-decodes (RFC 3986 §2.1), removes dot segments (RFC 3986 §5.2.4)
/// and collapses repeated '/'. The result starts with '/' and ends with '/'
/// when the decoded path did, or when its last segment was "." or ".."
/// (so "/a/b/.." gives "/a/", as §5.2.4 does).
///
/// Unlike §5.2.4, which silently drops a ".." at the root, this refuses it
/// with [`PathError::EscapesRoot`]: such a request is either broken or an
/// attack, and answering it as if it were "/" would hide that.
///
/// Allocates exactly one buffer, sized to the input (decoding never grows).
pub fn normalize(raw: &[u8]) -> Result<String, PathError> {
    if raw.first() != Some(&b'/') {
        return Err(PathError::NotAbsolute);
    }
    if already_normal(raw) {
        // Nothing to decode, collapse or check: the common case, taken
        // by every request (and every subrequest) without the loop below.
        // SAFETY: `already_normal` admits only ASCII bytes ('/', '-', '_',
        // '.', '~' and alphanumerics), and ASCII is valid UTF-8. (Checking
        // again with `String::from_utf8` cost ~90 instructions a request.)
        return Ok(unsafe { String::from_utf8_unchecked(raw.to_vec()) });
    }
    // Invariant: `out` starts with '/' and, between segments, ends with '/'.
    let mut out: Vec<u8> = Vec::with_capacity(raw.len());
    out.push(b'/');
    // Whether the result keeps a trailing '/'; decided by the last segment.
    let mut trailing = true;

    // Raw '/' and decoded '/' are the same thing here because %2F is
    // refused, so splitting the raw bytes splits the decoded path too.
    for seg in raw[1..].split(|&b| b == b'/') {
        let start = out.len();
        decode_segment(seg, &mut out)?;
        // Multi-byte UTF-8 sequences never contain '/', so checking each
        // segment is the same as checking the whole path, and it also
        // catches bad bytes in segments that a later ".." removes.
        if std::str::from_utf8(&out[start..]).is_err() {
            return Err(PathError::InvalidUtf8);
        }
        match &out[start..] {
            // Empty segment ("//" or a final '/'): collapse it.
            b"" => trailing = true,
            b"." => {
                out.truncate(start);
                trailing = true;
            }
            b".." => {
                out.truncate(start);
                if start == 1 {
                    return Err(PathError::EscapesRoot);
                }
                // Drop the previous segment: cut back to the '/' before it.
                // `out[..start - 1]` is non-empty and starts with '/'.
                let prev = out[..start - 1]
                    .iter()
                    .rposition(|&b| b == b'/')
                    .map_or(1, |i| i + 1);
                out.truncate(prev);
                trailing = true;
            }
            _ => {
                out.push(b'/');
                trailing = false;
            }
        }
    }
    if !trailing && out.len() > 1 {
        out.pop();
    }
    // Every segment was validated above, so this cannot fail; mapping the
    // error keeps the function panic-free all the same.
    String::from_utf8(out).map_err(|_| PathError::InvalidUtf8)
}

/// Whether `raw` (starting with '/') is its own normal form: only
/// unreserved ASCII and '/', no empty segment but a final one, no `.` or
/// `..` segment.
fn already_normal(raw: &[u8]) -> bool {
    let mut seg_start = 1;
    for (i, &b) in raw.iter().enumerate().skip(1) {
        match b {
            b'/' => {
                let seg = &raw[seg_start..i];
                if seg.is_empty() || seg == b"." || seg == b".." {
                    return false;
                }
                seg_start = i + 1;
            }
            _ if unreserved(b) => {}
            _ => return false,
        }
    }
    let last = &raw[seg_start..];
    last != b"." && last != b".."
}

/// Percent-decodes one segment (no '/' inside) onto `out`, refusing bytes
/// that must not reach the file system, whether they came raw or encoded.
fn decode_segment(seg: &[u8], out: &mut Vec<u8>) -> Result<(), PathError> {
    let mut i = 0;
    while i < seg.len() {
        let b = seg[i];
        let (byte, encoded) = if b == b'%' {
            let hi = seg.get(i + 1).and_then(|&h| hex_val(h));
            let lo = seg.get(i + 2).and_then(|&l| hex_val(l));
            match (hi, lo) {
                (Some(hi), Some(lo)) => {
                    i += 3;
                    ((hi << 4) | lo, true)
                }
                _ => return Err(PathError::BadPercentEncoding),
            }
        } else {
            i += 1;
            (b, false)
        };
        match byte {
            b'/' if encoded => return Err(PathError::EncodedSlash),
            0 => return Err(PathError::NulByte),
            b'\\' => return Err(PathError::Backslash),
            0x01..=0x1f | 0x7f => return Err(PathError::ControlChar),
            _ => out.push(byte),
        }
    }
    Ok(())
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-encodes a decoded path for a Location header or an href.
///
/// Keeps only unreserved characters (RFC 3986 §2.3) and '/', and encodes
/// every other byte of the UTF-8 form as `%XX` (upper-case, §2.1). This is
/// stricter than needed, but it means the result is safe inside a header,
/// an HTML attribute and as a relative reference: "a:b" becomes "a%3Ab",
/// which cannot be mistaken for a URI scheme (§4.2).
pub fn encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    encode_into(path, &mut out);
    out
}

/// Unreserved (RFC 3986 §2.3): what [`encode`] leaves as it is, besides '/'.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Whether [`encode`] would return `path` unchanged.
pub fn is_encoded(path: &str) -> bool {
    path.bytes().all(|b| b == b'/' || unreserved(b))
}

/// [`encode`], appending to an existing buffer.
pub fn encode_into(path: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in path.as_bytes() {
        if b == b'/' || unreserved(b) {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }
}

/// Where the script part of `path` ends: after the first `marker` followed
/// by '/' or the end of the path (nginx `fastcgi_split_path_info
/// ^(.+?\.php)(/.*)$`). ASCII case is ignored.
pub fn split_at(path: &str, marker: &str) -> Option<usize> {
    let (p, m) = (path.as_bytes(), marker.as_bytes());
    if m.is_empty() || p.len() < m.len() {
        return None;
    }
    (1..=p.len() - m.len())
        .find(|&i| {
            p[i..i + m.len()].eq_ignore_ascii_case(m)
                && matches!(p.get(i + m.len()), None | Some(b'/'))
        })
        .map(|i| i + m.len())
}

/// Whether `s` ends with `suffix`, ASCII case ignored.
pub fn ends_with_ignore_case(s: &str, suffix: &str) -> bool {
    s.len() >= suffix.len()
        && s.as_bytes()[s.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
}

#[cfg(test)]
mod tests {
    /// The fast path gives what the full loop gives, on paths that take it
    /// and on near misses.
    #[test]
    fn the_already_normal_fast_path_agrees_with_the_loop() {
        for p in [
            "/",
            "/a",
            "/a/",
            "/a/b.c",
            "/a-b_c~d/e.f/",
            "/.well-known/x",
            "/a/.b",
            "/a/..b",
            "/a..",
            "//",
            "/a//b",
            "/.",
            "/..",
            "/a/.",
            "/a/..",
            "/a/./b",
            "/a/../b",
            "/a%20b",
            "/a b",
            "/a\\b",
            "/é",
            "/x/.../y",
        ] {
            let raw = p.as_bytes();
            if super::already_normal(raw) {
                // The slow path's answer, computed without the shortcut.
                let mut out = Vec::new();
                let mut ok = true;
                for seg in raw[1..].split(|&b| b == b'/') {
                    ok &= super::decode_segment(seg, &mut out).is_ok();
                }
                assert!(ok, "{p}");
                assert!(
                    !p.contains("//") && !p.contains("/./") && !p.contains("/../"),
                    "{p}"
                );
                assert_eq!(super::normalize(raw).unwrap(), p, "{p}");
            }
        }
        assert!(super::already_normal(b"/a/b/"));
        assert!(!super::already_normal(b"/a/../b"));
        assert!(!super::already_normal(b"/a%2e"));
        assert_eq!(super::normalize(b"/a/./b/../c").unwrap(), "/a/c");
    }

    use super::*;

    fn ok(raw: &[u8]) -> String {
        match normalize(raw) {
            Ok(s) => s,
            Err(e) => panic!("{:?} refused: {e:?}", String::from_utf8_lossy(raw)),
        }
    }

    fn err(raw: &[u8]) -> PathError {
        match normalize(raw) {
            Ok(s) => panic!("{:?} accepted as {s:?}", String::from_utf8_lossy(raw)),
            Err(e) => e,
        }
    }

    #[test]
    fn root_stays_root() {
        assert_eq!(ok(b"/"), "/");
        assert_eq!(ok(b"//"), "/");
        assert_eq!(ok(b"///"), "/");
    }

    #[test]
    fn plain_paths_are_unchanged() {
        assert_eq!(ok(b"/index.html"), "/index.html");
        assert_eq!(ok(b"/a/b/c.txt"), "/a/b/c.txt");
        assert_eq!(ok(b"/a/b/"), "/a/b/");
    }

    #[test]
    fn non_absolute_targets_are_refused() {
        assert_eq!(err(b""), PathError::NotAbsolute);
        assert_eq!(err(b"*"), PathError::NotAbsolute);
        assert_eq!(err(b"http://host/p"), PathError::NotAbsolute);
        assert_eq!(err(b"a/b"), PathError::NotAbsolute);
        assert_eq!(err(b"%2Fa"), PathError::NotAbsolute);
    }

    #[test]
    fn repeated_slashes_collapse() {
        assert_eq!(ok(b"//a///b"), "/a/b");
        assert_eq!(ok(b"/a//b//"), "/a/b/");
    }

    #[test]
    fn rfc3986_2_1_percent_decoding() {
        assert_eq!(ok(b"/a%20b"), "/a b");
        assert_eq!(ok(b"/%41%62%63"), "/Abc");
        // Hex digits are case-insensitive.
        assert_eq!(ok(b"/%7e%7E"), "/~~");
        // A decoded '%' is just a byte: no double decoding.
        assert_eq!(ok(b"/%2541"), "/%41");
        // '?' and '#' can only reach the path encoded.
        assert_eq!(ok(b"/q%3Fx%23y"), "/q?x#y");
    }

    #[test]
    fn rfc3986_2_1_bad_percent_escapes_are_refused() {
        assert_eq!(err(b"/%"), PathError::BadPercentEncoding);
        assert_eq!(err(b"/%4"), PathError::BadPercentEncoding);
        assert_eq!(err(b"/%zz"), PathError::BadPercentEncoding);
        assert_eq!(err(b"/%4g"), PathError::BadPercentEncoding);
        assert_eq!(err(b"/a%/b"), PathError::BadPercentEncoding);
        assert_eq!(err(b"/%%41"), PathError::BadPercentEncoding);
        // No "%u" extension (IIS).
        assert_eq!(err(b"/%u002e"), PathError::BadPercentEncoding);
    }

    #[test]
    fn utf8_paths_decode() {
        assert_eq!(ok(b"/caf%C3%A9"), "/caf\u{e9}");
        assert_eq!(ok("/caf\u{e9}".as_bytes()), "/caf\u{e9}");
        assert_eq!(ok(b"/%E2%82%AC/"), "/\u{20ac}/");
    }

    #[test]
    fn invalid_utf8_is_refused() {
        assert_eq!(err(b"/%FF"), PathError::InvalidUtf8);
        assert_eq!(err(b"/\xff"), PathError::InvalidUtf8);
        // Truncated sequence, and an overlong encoding of '/' (C0 AF).
        assert_eq!(err(b"/%C3"), PathError::InvalidUtf8);
        assert_eq!(err(b"/%C0%AF"), PathError::InvalidUtf8);
        assert_eq!(err(b"/%C0%AE%C0%AE/x"), PathError::InvalidUtf8);
        // Even in a segment that ".." removes afterwards.
        assert_eq!(err(b"/%FF/../x"), PathError::InvalidUtf8);
    }

    #[test]
    fn encoded_slash_is_refused() {
        assert_eq!(err(b"/a%2Fb"), PathError::EncodedSlash);
        assert_eq!(err(b"/a%2fb"), PathError::EncodedSlash);
        assert_eq!(err(b"/..%2f..%2fetc/passwd"), PathError::EncodedSlash);
    }

    #[test]
    fn nul_is_refused_raw_and_encoded() {
        assert_eq!(err(b"/a\0b"), PathError::NulByte);
        assert_eq!(err(b"/a%00b"), PathError::NulByte);
        assert_eq!(err(b"/index.html%00.txt"), PathError::NulByte);
    }

    #[test]
    fn backslash_is_refused_raw_and_encoded() {
        assert_eq!(err(b"/a\\b"), PathError::Backslash);
        assert_eq!(err(b"/a%5Cb"), PathError::Backslash);
        assert_eq!(err(b"/a%5cb"), PathError::Backslash);
        assert_eq!(err(b"/..%5C..%5Cwindows"), PathError::Backslash);
    }

    #[test]
    fn control_chars_are_refused_raw_and_encoded() {
        for b in (0x01u8..=0x1f).chain([0x7f]) {
            let raw = [b'/', b'a', b];
            assert_eq!(err(&raw), PathError::ControlChar, "raw {b:#04x}");
            let enc = format!("/a%{b:02X}");
            assert_eq!(err(enc.as_bytes()), PathError::ControlChar, "{enc}");
            let enc = format!("/a%{b:02x}");
            assert_eq!(err(enc.as_bytes()), PathError::ControlChar, "{enc}");
        }
    }

    #[test]
    fn crlf_injection_is_refused() {
        assert_eq!(err(b"/a%0D%0ASet-Cookie:x=y"), PathError::ControlChar);
        assert_eq!(err(b"/a\r\nb"), PathError::ControlChar);
    }

    #[test]
    fn rfc3986_5_2_4_single_dots_are_removed() {
        assert_eq!(ok(b"/./a"), "/a");
        assert_eq!(ok(b"/a/./b"), "/a/b");
        assert_eq!(ok(b"/a/."), "/a/");
        assert_eq!(ok(b"/a/./"), "/a/");
        assert_eq!(ok(b"/."), "/");
        assert_eq!(ok(b"/./"), "/");
        assert_eq!(ok(b"/%2e/a"), "/a");
    }

    #[test]
    fn rfc3986_5_2_4_double_dots_remove_the_previous_segment() {
        assert_eq!(ok(b"/a/../b"), "/b");
        assert_eq!(ok(b"/a/b/../c"), "/a/c");
        assert_eq!(ok(b"/a/b/.."), "/a/");
        assert_eq!(ok(b"/a/b/../"), "/a/");
        assert_eq!(ok(b"/a/.."), "/");
        assert_eq!(ok(b"/a/b/../../c"), "/c");
        assert_eq!(ok(b"/a//../b"), "/b");
        assert_eq!(ok(b"/a/%2e%2e/b"), "/b");
        assert_eq!(ok(b"/a/.%2E/b"), "/b");
        // The RFC's own example, minus the relative part.
        assert_eq!(ok(b"/a/b/c/./../../g"), "/a/g");
    }

    #[test]
    fn names_that_only_look_like_dots_are_kept() {
        assert_eq!(ok(b"/..."), "/...");
        assert_eq!(ok(b"/..a"), "/..a");
        assert_eq!(ok(b"/a.."), "/a..");
        assert_eq!(ok(b"/.hidden"), "/.hidden");
        assert_eq!(ok(b"/.. "), "/.. ");
        assert_eq!(ok(b"/%2e%2e%2e"), "/...");
    }

    #[test]
    fn traversal_above_the_root_is_refused() {
        assert_eq!(err(b"/.."), PathError::EscapesRoot);
        assert_eq!(err(b"/../"), PathError::EscapesRoot);
        assert_eq!(err(b"/../x"), PathError::EscapesRoot);
        assert_eq!(err(b"/a/../../x"), PathError::EscapesRoot);
        assert_eq!(err(b"/a/b/../../../etc/passwd"), PathError::EscapesRoot);
        assert_eq!(err(b"//../x"), PathError::EscapesRoot);
        assert_eq!(err(b"/./../x"), PathError::EscapesRoot);
    }

    #[test]
    fn encoded_traversal_above_the_root_is_refused() {
        assert_eq!(err(b"/%2e%2e/x"), PathError::EscapesRoot);
        assert_eq!(err(b"/%2E%2E/x"), PathError::EscapesRoot);
        assert_eq!(err(b"/.%2e/x"), PathError::EscapesRoot);
        assert_eq!(err(b"/%2e./x"), PathError::EscapesRoot);
        assert_eq!(err(b"/a/%2e%2e/%2e%2e/etc/passwd"), PathError::EscapesRoot);
    }

    #[test]
    fn result_never_contains_dot_segments_or_double_slashes() {
        let cases: &[&[u8]] = &[
            b"/a/./b/../c//d/.",
            b"/x/y/z/../../..",
            b"/%2e/%2e%2e/",
            b"/a/b/c/.././././",
        ];
        for raw in cases {
            // "/%2e/%2e%2e/" climbs out; the rest must be clean.
            let Ok(p) = normalize(raw) else { continue };
            assert!(p.starts_with('/'));
            assert!(!p.contains("//"), "{p}");
            assert!(!p.split('/').any(|s| s == "." || s == ".."), "{p}");
        }
    }

    #[test]
    fn encode_keeps_unreserved_and_slash() {
        let s = "/AZaz09-._~/x/";
        assert_eq!(encode(s), s);
        assert_eq!(encode(""), "");
    }

    #[test]
    fn encode_escapes_everything_else() {
        assert_eq!(encode("/a b"), "/a%20b");
        assert_eq!(encode("/\"<>#?%"), "/%22%3C%3E%23%3F%25");
        assert_eq!(encode("/a:b"), "/a%3Ab");
        assert_eq!(encode("/a&b'c"), "/a%26b%27c");
        assert_eq!(encode("/caf\u{e9}"), "/caf%C3%A9");
        assert_eq!(encode("/\u{20ac}"), "/%E2%82%AC");
        assert_eq!(encode("/\r\n"), "/%0D%0A");
    }

    #[test]
    fn encode_then_normalize_round_trips() {
        for p in ["/", "/a b/", "/caf\u{e9}/x?y#z", "/100%", "/a&b/c;d"] {
            assert_eq!(ok(encode(p).as_bytes()), p);
        }
    }

    #[test]
    fn encode_into_appends() {
        let mut s = String::from("<");
        encode_into("a b", &mut s);
        assert_eq!(s, "<a%20b");
    }
}
