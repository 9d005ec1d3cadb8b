//! `Location`, `Content-Location` and `Refresh` as the client must see
//! them when the upstream's view of the URL differs from the client's (a
//! stripped prefix, a replaced Host): nginx's `proxy_redirect default`,
//! Apache's `ProxyPassReverse`.

use crate::eq_ignore_case;

/// How URLs map from the upstream's view to the client's.
#[derive(Debug, Clone, Copy)]
pub struct RedirectRule<'a> {
    /// The Host sent upstream: what the upstream calls itself in absolute
    /// URLs (its address when the Host was replaced).
    pub upstream_host: &'a [u8],
    /// The route's prefix as the upstream sees it: `/` when `/app/` was
    /// stripped, `/app/` when not.
    pub upstream_prefix: &'a [u8],
    /// The scheme the client used (`https` behind TLS, even though the
    /// upstream speaks and may write `http`).
    pub client_scheme: &'a str,
    /// The Host the client used.
    pub client_host: &'a [u8],
    /// The route's prefix as the client sees it.
    pub client_prefix: &'a [u8],
}

/// The scheme's length including `://`, for http and https.
fn scheme_len(v: &[u8]) -> Option<usize> {
    if v.len() >= 7 && eq_ignore_case(&v[..7], b"http://") {
        Some(7)
    } else if v.len() >= 8 && eq_ignore_case(&v[..8], b"https://") {
        Some(8)
    } else {
        None
    }
}

/// Appends `path` (a path with its query and fragment, maybe empty) with
/// the upstream prefix replaced by the client's; false, appending
/// nothing, when the path is not under the upstream prefix.
fn push_mapped_path(out: &mut Vec<u8>, path: &[u8], rule: &RedirectRule<'_>) -> bool {
    let up = rule.upstream_prefix;
    if already_prefixed(path, rule) {
        return false;
    }
    // What follows the prefix, and whether the prefix's own slash belongs
    // in front of it.
    let tail = match path.strip_prefix(up) {
        // `http://h`, `http://h?q`, `http://h#f`: the path is `/`.
        _ if !path.starts_with(b"/") => (up == b"/").then_some((true, path)),
        Some(rest) if up.ends_with(b"/") => Some((true, rest)),
        // A prefix without its slash matches whole segments only.
        Some(rest) if matches!(rest.first(), None | Some(b'/' | b'?' | b'#')) => {
            Some((false, rest))
        }
        _ => None,
    }
    .or_else(|| {
        // `/app` for the prefix `/app/`: the directory itself.
        let dir = up.strip_suffix(b"/").filter(|d| !d.is_empty())?;
        let rest = path.strip_prefix(dir)?;
        matches!(rest.first(), None | Some(b'?' | b'#')).then_some((false, rest))
    });
    let Some((slash, rest)) = tail else {
        return false;
    };
    let cp = rule.client_prefix;
    let cp = cp.strip_suffix(b"/").unwrap_or(cp);
    if cp.is_empty() && !slash && !rest.starts_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(cp);
    if slash {
        out.push(b'/');
    }
    out.extend_from_slice(rest);
    true
}

/// Whether `path` is under the client's prefix already although the
/// upstream's differs: an application told the prefix (`X-Forwarded-Prefix`,
/// Django's `FORCE_SCRIPT_NAME`) writes it itself, and mapping again would
/// give `/app/app/…`.
fn already_prefixed(path: &[u8], rule: &RedirectRule<'_>) -> bool {
    let cp = rule.client_prefix;
    let cp = cp.strip_suffix(b"/").unwrap_or(cp);
    if cp.is_empty() || rule.upstream_prefix.starts_with(cp) {
        return false;
    }
    path.strip_prefix(cp)
        .is_some_and(|rest| matches!(rest.first(), None | Some(b'/' | b'?' | b'#')))
}

/// Appends the client's view of a `Location` or `Content-Location` value
/// and returns true, or appends nothing and returns false when the value
/// stays as it is.
///
/// An absolute URL naming the upstream's host gets the client's scheme
/// and host, and its path mapped to the client's prefix when it is under
/// the upstream's. Outside the prefix only the origin is replaced: the
/// upstream's address is never useful to a client. An absolute path is
/// mapped when under the prefix. Relative references and other hosts are
/// left alone.
pub fn rewrite_location(value: &[u8], rule: &RedirectRule<'_>, out: &mut Vec<u8>) -> bool {
    let mark = out.len();
    let (authority_at, absolute) = match scheme_len(value) {
        Some(n) => (Some(n), true),
        // A network-path reference (`//host/x`) keeps the client's scheme.
        None if value.starts_with(b"//") => (Some(2), false),
        None => (None, false),
    };
    let path = match authority_at {
        Some(at) => {
            let rest = &value[at..];
            let end = rest
                .iter()
                .position(|&b| matches!(b, b'/' | b'?' | b'#'))
                .unwrap_or(rest.len());
            if !eq_ignore_case(&rest[..end], rule.upstream_host) {
                return false;
            }
            if absolute {
                out.extend_from_slice(rule.client_scheme.as_bytes());
                out.extend_from_slice(b":");
            }
            out.extend_from_slice(b"//");
            out.extend_from_slice(rule.client_host);
            let path = &rest[end..];
            if !push_mapped_path(out, path, rule) {
                out.extend_from_slice(path);
            }
            return if &out[mark..] == value {
                out.truncate(mark);
                false
            } else {
                true
            };
        }
        None if value.starts_with(b"/") => value,
        None => return false,
    };
    if rule.upstream_prefix == rule.client_prefix || !push_mapped_path(out, path, rule) {
        out.truncate(mark);
        return false;
    }
    true
}

/// The same for `Refresh: 5; url=/x` (the URL after `url=`, quoted or
/// not; the delay and anything else kept as sent).
pub fn rewrite_refresh(value: &[u8], rule: &RedirectRule<'_>, out: &mut Vec<u8>) -> bool {
    let Some(sep) = value.iter().position(|&b| b == b';' || b == b',') else {
        return false;
    };
    let mut i = sep + 1;
    while value.get(i).is_some_and(|&b| b == b' ' || b == b'\t') {
        i += 1;
    }
    let Some(rest) = value.get(i..) else {
        return false;
    };
    let mut start = i;
    if rest.len() >= 4 && eq_ignore_case(&rest[..4], b"url=") {
        start += 4;
    }
    let mut end = value.len();
    if let Some(&q @ (b'\'' | b'"')) = value.get(start) {
        start += 1;
        end = value[start..]
            .iter()
            .position(|&b| b == q)
            .map_or(value.len(), |p| start + p);
    }
    let mark = out.len();
    out.extend_from_slice(&value[..start]);
    if !rewrite_location(&value[start..end], rule, out) {
        out.truncate(mark);
        return false;
    }
    out.extend_from_slice(&value[end..]);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/app/` on https://example.com proxied, prefix stripped, to an
    /// upstream at 127.0.0.1:8081 whose Host was replaced.
    const STRIPPED: RedirectRule<'static> = RedirectRule {
        upstream_host: b"127.0.0.1:8081",
        upstream_prefix: b"/",
        client_scheme: "https",
        client_host: b"example.com",
        client_prefix: b"/app/",
    };

    fn loc(v: &str, rule: &RedirectRule<'_>) -> Option<String> {
        let mut out = b"prev".to_vec();
        let r = rewrite_location(v.as_bytes(), rule, &mut out);
        let tail = String::from_utf8(out[4..].to_vec()).expect("ascii");
        assert_eq!(r, !tail.is_empty(), "{v}: returned {r}, wrote {tail:?}");
        r.then_some(tail)
    }

    #[test]
    fn an_absolute_location_naming_the_upstream_gets_the_client_origin_and_prefix() {
        let l = |v| loc(v, &STRIPPED);
        assert_eq!(
            l("http://127.0.0.1:8081/login?next=/x").as_deref(),
            Some("https://example.com/app/login?next=/x")
        );
        assert_eq!(
            l("HTTP://127.0.0.1:8081").as_deref(),
            Some("https://example.com/app/")
        );
        assert_eq!(
            l("http://127.0.0.1:8081#f").as_deref(),
            Some("https://example.com/app/#f")
        );
        assert_eq!(
            l("//127.0.0.1:8081/x").as_deref(),
            Some("//example.com/app/x")
        );
        // Another host is someone else's URL.
        assert_eq!(l("http://other.example/x"), None);
        assert_eq!(l("http://127.0.0.1:80812/x"), None);
    }

    #[test]
    fn an_absolute_path_is_mapped_into_the_stripped_prefix() {
        let l = |v| loc(v, &STRIPPED);
        assert_eq!(l("/login").as_deref(), Some("/app/login"));
        assert_eq!(l("/").as_deref(), Some("/app/"));
        // Relative references resolve against the client's URL already.
        assert_eq!(l("login"), None);
        assert_eq!(l("../x"), None);
        assert_eq!(l(""), None);
    }

    #[test]
    fn a_prefix_added_by_the_upstream_is_taken_off() {
        let rule = RedirectRule {
            upstream_host: b"backend:8080",
            upstream_prefix: b"/api/",
            client_scheme: "http",
            client_host: b"example.com",
            client_prefix: b"/",
        };
        let l = |v| loc(v, &rule);
        assert_eq!(l("/api/x").as_deref(), Some("/x"));
        assert_eq!(l("/api").as_deref(), Some("/"));
        assert_eq!(l("/api?q").as_deref(), Some("/?q"));
        assert_eq!(l("/apix"), None);
        assert_eq!(l("/other"), None);
        // Outside the prefix only the origin changes.
        assert_eq!(
            l("http://backend:8080/other").as_deref(),
            Some("http://example.com/other")
        );
    }

    #[test]
    fn nothing_changes_when_host_and_prefix_are_the_same() {
        let rule = RedirectRule {
            upstream_host: b"example.com",
            upstream_prefix: b"/app/",
            client_scheme: "http",
            client_host: b"example.com",
            client_prefix: b"/app/",
        };
        assert_eq!(loc("http://example.com/app/x", &rule), None);
        assert_eq!(loc("/app/x", &rule), None);
        // But an upstream that says http behind a TLS front is corrected.
        let tls = RedirectRule {
            client_scheme: "https",
            ..rule
        };
        assert_eq!(
            loc("http://example.com/app/x", &tls).as_deref(),
            Some("https://example.com/app/x")
        );
    }

    #[test]
    fn a_prefix_without_slash_maps_whole_segments_only() {
        let rule = RedirectRule {
            upstream_host: b"u",
            upstream_prefix: b"/",
            client_scheme: "http",
            client_host: b"c",
            client_prefix: b"/app",
        };
        assert_eq!(loc("/x", &rule).as_deref(), Some("/app/x"));
        let back = RedirectRule {
            upstream_prefix: b"/app",
            client_prefix: b"/",
            ..rule
        };
        assert_eq!(loc("/app/x", &back).as_deref(), Some("/x"));
        assert_eq!(loc("/apple", &back), None);
    }

    #[test]
    fn refresh_urls_are_rewritten_quoted_or_not() {
        let r = |v: &str| {
            let mut out = Vec::new();
            rewrite_refresh(v.as_bytes(), &STRIPPED, &mut out)
                .then(|| String::from_utf8(out).expect("ascii"))
        };
        assert_eq!(r("5; url=/x").as_deref(), Some("5; url=/app/x"));
        assert_eq!(
            r("0;URL='http://127.0.0.1:8081/y'").as_deref(),
            Some("0;URL='https://example.com/app/y'")
        );
        assert_eq!(r("1; /z").as_deref(), Some("1; /app/z"));
        assert_eq!(r("5"), None);
        assert_eq!(r("5; url=http://elsewhere/"), None);
    }

    /// With the client's Host preserved the upstream names the client's
    /// host in an absolute Location; it is put back under the stripped
    /// prefix as nginx's `proxy_redirect` and Caddy's strip-prefix
    /// handling do. A path the application already wrote under the
    /// prefix (it read `X-Forwarded-Prefix`) is not prefixed twice.
    #[test]
    fn a_location_from_the_preserved_host_goes_back_under_the_prefix_once() {
        let rule = RedirectRule {
            upstream_host: b"example.com",
            upstream_prefix: b"",
            client_scheme: "http",
            client_host: b"example.com",
            client_prefix: b"/app",
        };
        assert_eq!(
            loc("http://example.com/target", &rule).as_deref(),
            Some("http://example.com/app/target")
        );
        assert_eq!(
            loc("/target?x=1", &rule).as_deref(),
            Some("/app/target?x=1")
        );
        assert_eq!(
            loc("/accounts/login/?next=/app/admin/", &rule).as_deref(),
            Some("/app/accounts/login/?next=/app/admin/")
        );
        assert_eq!(loc("/app/admin/", &rule), None);
        assert_eq!(loc("http://example.com/app/admin/", &rule), None);
        assert_eq!(loc("/apple", &rule).as_deref(), Some("/app/apple"));
    }
}
