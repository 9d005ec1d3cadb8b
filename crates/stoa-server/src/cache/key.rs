//! The cache key of a request, from the route's list of key parts, and
//! the route's bypass rules.
//!
//! API:
//! - [`KeySpec::parse`] (the config's `key = [...]`: `scheme`, `host`,
//!   `path`, `query`, `method`, `header:NAME`, `cookie:NAME`, `arg:NAME`)
//!   and [`KeySpec::key`] → [`Key`]: the full key bytes (each part tagged
//!   and length-prefixed, so two requests that differ in any part never
//!   make the same bytes); the store hashes and compares them.
//! - [`url`]: the request's URL form `scheme://host/path?query` (host
//!   lowercased, default port removed), what purge by URL and RFC 9111
//!   §4.4 invalidation name; [`normal_host`].
//! - [`Bypass::new`] (the config's `bypass = {cookies, args, headers}`,
//!   names with `*` globs) and [`Bypass::matches`].

use stoa_h1::RequestHead;

/// The route's key parts, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeySpec {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Scheme,
    Host,
    Path,
    Query,
    Method,
    /// A request field's value (all its lines, joined by ", ").
    Header(String),
    /// A cookie's value (the first cookie of that name; names are
    /// case-sensitive, RFC 6265 §5.4).
    Cookie(String),
    /// A query argument's value (the first of that name, as sent).
    Arg(String),
}

impl Part {
    /// The tag that starts this part in the key bytes.
    fn tag(&self) -> u8 {
        match self {
            Part::Scheme => b's',
            Part::Host => b'h',
            Part::Path => b'p',
            Part::Query => b'q',
            Part::Method => b'm',
            Part::Header(_) => b'H',
            Part::Cookie(_) => b'C',
            Part::Arg(_) => b'A',
        }
    }
}

/// A request's primary cache key: the full bytes (the store compares
/// them whole: a response stored for one key is never served for
/// another, whatever their hashes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    bytes: Box<[u8]>,
}

impl Key {
    /// A key from its full bytes (as [`Key::bytes`] gave them: a key read
    /// back from disk).
    pub(crate) fn from_bytes(bytes: &[u8]) -> Key {
        Key {
            bytes: bytes.into(),
        }
    }

    /// The full key bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Appends a part: its tag, then `0` when absent, or `1`, its length (4
/// bytes, little-endian) and its bytes. Absent and empty differ; no value
/// can run into the next part.
fn put(k: &mut Vec<u8>, tag: u8, v: Option<&[u8]>) {
    k.push(tag);
    match v {
        None => k.push(0),
        Some(v) => {
            // Values come from one request head (a few KB at most); the
            // saturation keeps the encoding total without a panic.
            let n = u32::try_from(v.len()).unwrap_or(u32::MAX);
            k.push(1);
            k.extend_from_slice(&n.to_le_bytes());
            k.extend_from_slice(&v[..n as usize]);
        }
    }
}

impl KeySpec {
    /// The parts as the config lists them; an unknown part, an empty
    /// name or a part listed twice is an error (the message names it).
    pub(crate) fn parse(parts: &[String]) -> Result<KeySpec, String> {
        let mut out: Vec<Part> = Vec::with_capacity(parts.len());
        for p in parts {
            let part = match p.as_str() {
                "scheme" => Part::Scheme,
                "host" => Part::Host,
                "path" => Part::Path,
                "query" => Part::Query,
                "method" => Part::Method,
                _ => match p.split_once(':') {
                    Some(("header", n)) if is_token(n) => Part::Header(n.to_ascii_lowercase()),
                    Some(("cookie", n)) if is_cookie_name(n) => Part::Cookie(n.to_owned()),
                    Some(("arg", n)) if !n.is_empty() && !n.contains(['&', '=', '#']) => {
                        Part::Arg(n.to_owned())
                    }
                    Some(("header" | "cookie" | "arg", _)) => {
                        return Err(format!("`{p}`: the name is empty or not a valid name"))
                    }
                    _ => {
                        return Err(format!(
                            "`{p}` is not a key part (scheme, host, path, query, method, \
                             header:NAME, cookie:NAME, arg:NAME)"
                        ))
                    }
                },
            };
            if out.contains(&part) {
                return Err(format!("`{p}` is listed twice"));
            }
            out.push(part);
        }
        if out.is_empty() {
            return Err("the key has no parts".into());
        }
        Ok(KeySpec { parts: out })
    }

    /// The key of `req`, received over `scheme` ("http" or "https").
    pub(crate) fn key(&self, req: &RequestHead, scheme: &str) -> Key {
        let mut k = Vec::with_capacity(16 + req.target().len() + 32);
        self.key_into(req, scheme, &mut k, &mut Vec::new());
        Key::from_bytes(&k)
    }

    /// The full key bytes of `req` ([`KeySpec::key`]'s) into `k`, with
    /// `scratch` for the parts that are built first: buffers a caller
    /// keeps, so that a hit allocates nothing.
    pub(crate) fn key_into(
        &self,
        req: &RequestHead,
        scheme: &str,
        k: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) {
        k.clear();
        for p in &self.parts {
            let tag = p.tag();
            match p {
                Part::Scheme => put(k, tag, Some(scheme.as_bytes())),
                Part::Host => {
                    scratch.clear();
                    let present = req.host().map(|h| normal_host(h, scheme, scratch));
                    put(k, tag, present.map(|()| &scratch[..]));
                }
                Part::Path => put(k, tag, Some(req.path())),
                Part::Query => put(k, tag, req.query()),
                Part::Method => put(k, tag, Some(req.method.as_str().as_bytes())),
                Part::Header(n) => {
                    put(k, b'n', Some(n.as_bytes()));
                    scratch.clear();
                    let mut any = false;
                    for (_, v) in req
                        .headers()
                        .filter(|(h, _)| h.eq_ignore_ascii_case(n.as_bytes()))
                    {
                        if any {
                            scratch.extend_from_slice(b", ");
                        }
                        scratch.extend_from_slice(v);
                        any = true;
                    }
                    put(k, tag, any.then_some(&scratch[..]));
                }
                Part::Cookie(n) => {
                    put(k, b'n', Some(n.as_bytes()));
                    put(
                        k,
                        tag,
                        cookies(req).find(|(c, _)| *c == n.as_bytes()).map(|c| c.1),
                    );
                }
                Part::Arg(n) => {
                    put(k, b'n', Some(n.as_bytes()));
                    put(
                        k,
                        tag,
                        args(req)
                            .find(|(a, _)| *a == n.as_bytes())
                            .map(|a| a.1.unwrap_or(b"")),
                    );
                }
            }
        }
    }
}

/// The request's cookies as (name, value), in order, from every `Cookie`
/// line (HTTP/2 sends one per cookie).
fn cookies(req: &RequestHead) -> impl Iterator<Item = (&[u8], &[u8])> {
    req.headers()
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"cookie"))
        .flat_map(|(_, v)| v.split(|&b| b == b';'))
        .filter_map(|c| {
            let c = stoa_h1::trim(c);
            let eq = c.iter().position(|&b| b == b'=')?;
            Some((stoa_h1::trim(&c[..eq]), stoa_h1::trim(&c[eq + 1..])))
        })
}

/// The query's arguments as (name, value if `=`), as sent (not decoded).
fn args(req: &RequestHead) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
    req.query()
        .unwrap_or(b"")
        .split(|&b| b == b'&')
        .filter(|a| !a.is_empty())
        .map(|a| match a.iter().position(|&b| b == b'=') {
            Some(eq) => (&a[..eq], Some(&a[eq + 1..])),
            None => (a, None),
        })
}

/// `host` (a Host field value or an authority) as the key and URLs hold
/// it, into `out`: lowercased (RFC 3986 §6.2.2.1), and without the
/// scheme's default port or an empty port (§6.2.3).
pub(crate) fn normal_host(host: &[u8], scheme: &str, out: &mut Vec<u8>) {
    let host = stoa_h1::trim(host);
    // The port follows the last ':' outside an IPv6 literal's brackets.
    let after_literal = host.iter().rposition(|&b| b == b']').map_or(0, |i| i + 1);
    let (name, port) = match host[after_literal..].iter().rposition(|&b| b == b':') {
        Some(i) => (
            &host[..after_literal + i],
            Some(&host[after_literal + i + 1..]),
        ),
        None => (host, None),
    };
    let default: &[u8] = match scheme {
        "https" => b"443",
        _ => b"80",
    };
    out.extend(name.iter().map(u8::to_ascii_lowercase));
    if let Some(p) = port {
        if !p.is_empty() && p != default {
            out.push(b':');
            out.extend_from_slice(p);
        }
    }
}

/// The request's URL `scheme://host/path?query` (host as
/// [`normal_host`]; the path and query as sent): what purge by URL names
/// and RFC 9111 §4.4 invalidates. Bytes that are not UTF-8 (a request's
/// path may hold any) are replaced, so two such URLs may read alike:
/// only ever a purge/invalidation name, never the key itself.
pub(crate) fn url(req: &RequestHead, scheme: &str) -> String {
    let mut u = Vec::with_capacity(scheme.len() + 3 + req.target().len() + 32);
    u.extend_from_slice(scheme.as_bytes());
    u.extend_from_slice(b"://");
    if let Some(h) = req.host() {
        normal_host(h, scheme, &mut u);
    }
    let path = req.path();
    if !path.starts_with(b"/") {
        u.push(b'/');
    }
    u.extend_from_slice(path);
    if let Some(q) = req.query() {
        u.push(b'?');
        u.extend_from_slice(q);
    }
    String::from_utf8(u).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// RFC 9110 §5.6.2 token.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A cookie name (RFC 6265 §4.1.1: a token), `*` allowed for globs.
fn is_cookie_name(s: &str) -> bool {
    is_token(s)
}

/// The route's bypass rules: a request that matches any goes to the
/// application, neither looked up nor stored (nginx `proxy_cache_bypass`
/// with `proxy_no_cache`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Bypass {
    /// Cookie name patterns (`*` matches any run of bytes; names are
    /// case-sensitive, RFC 6265 §5.4).
    cookies: Vec<String>,
    /// Query argument name patterns.
    args: Vec<String>,
    /// Request field names (lowercase).
    headers: Vec<String>,
}

impl Bypass {
    /// Checked rules: names must be tokens (`*` allowed in cookie and
    /// argument patterns); the message names the bad one.
    pub(crate) fn new(
        cookies: &[String],
        args: &[String],
        headers: &[String],
    ) -> Result<Bypass, String> {
        for c in cookies {
            if !is_cookie_name(c) {
                return Err(format!("cookies: `{c}` is not a cookie name"));
            }
        }
        for a in args {
            if a.is_empty() || a.contains(['&', '=', '#', ' ']) {
                return Err(format!("args: `{a}` is not an argument name"));
            }
        }
        for h in headers {
            if !is_token(h) || h.contains('*') {
                return Err(format!("headers: `{h}` is not a field name"));
            }
        }
        Ok(Bypass {
            cookies: cookies.to_vec(),
            args: args.to_vec(),
            headers: headers.iter().map(|h| h.to_ascii_lowercase()).collect(),
        })
    }

    /// No rules: nothing is bypassed.
    pub(crate) fn is_empty(&self) -> bool {
        self.cookies.is_empty() && self.args.is_empty() && self.headers.is_empty()
    }

    /// Whether `req` is bypassed: it has a cookie whose name matches a
    /// pattern (any value), a query argument whose name matches one and
    /// whose value is not `0` (`?nocache` and `?nocache=1` bypass,
    /// `?nocache=0` does not: nginx's `$arg_` test, but a bare name
    /// counts), or one of the fields with a value other than empty or `0`
    /// (nginx's `proxy_cache_bypass $http_x_no_cache`).
    pub(crate) fn matches(&self, req: &RequestHead) -> bool {
        if self.is_empty() {
            return false;
        }
        let header = self.headers.iter().any(|h| {
            req.headers()
                .any(|(n, v)| n.eq_ignore_ascii_case(h.as_bytes()) && !v.is_empty() && v != b"0")
        });
        header
            || (!self.cookies.is_empty()
                && cookies(req).any(|(n, _)| self.cookies.iter().any(|p| glob(p.as_bytes(), n))))
            || (!self.args.is_empty()
                && args(req).any(|(n, v)| {
                    v != Some(b"0") && self.args.iter().any(|p| glob(p.as_bytes(), n))
                }))
    }
}

/// Whether `name` matches `pattern`, where `*` matches any run of bytes
/// (none included) and every other byte itself. Linear backtracking on
/// the last `*`: no recursion, O(len²) at worst.
pub(crate) fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, n));
            p += 1;
        } else if p < pattern.len() && pattern[p] == name[n] {
            p += 1;
            n += 1;
        } else if let Some((sp, sn)) = star {
            p = sp + 1;
            n = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use stoa_h1::{Method, Version};

    fn req(target: &str, h: &[(&str, &str)]) -> RequestHead {
        req_m(Method::Get, target, h)
    }

    fn req_m(m: Method, target: &str, h: &[(&str, &str)]) -> RequestHead {
        RequestHead::from_parts(
            m,
            target.as_bytes(),
            Version::Http11,
            h.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        )
    }

    /// A head parsed from HTTP/1 text (an absolute-form target).
    fn parsed(text: &str) -> RequestHead {
        let mut r = RequestHead::default();
        r.parse(text.as_bytes(), &stoa_h1::RequestLimits::default())
            .expect("valid")
            .expect("complete");
        r
    }

    fn spec(parts: &[&str]) -> KeySpec {
        KeySpec::parse(&parts.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("spec")
    }

    fn default() -> KeySpec {
        spec(&["scheme", "host", "path", "query"])
    }

    fn k(s: &KeySpec, target: &str, h: &[(&str, &str)]) -> Key {
        s.key(&req(target, h), "http")
    }

    #[test]
    fn the_same_request_makes_the_same_key() {
        let s = default();
        let a = k(&s, "/a?x=1", &[("Host", "ex.com")]);
        let b = k(&s, "/a?x=1", &[("Host", "ex.com")]);
        assert_eq!(a, b);
        assert_eq!(Key::from_bytes(a.bytes()), a);
    }

    #[test]
    fn parts_cannot_run_into_each_other() {
        let s = default();
        // Without lengths, "/a" + "b=1" and "/a?b" + "=1" could read alike.
        let keys = [
            k(&s, "/a?b=1", &[("Host", "ex.com")]),
            k(&s, "/a?b=1", &[("Host", "ex.co")]),
            k(&s, "/a", &[("Host", "ex.com")]),
            k(&s, "/a?", &[("Host", "ex.com")]),
            k(&s, "/", &[("Host", "ex.com")]),
            k(&s, "/a?b=1", &[]),
            k(&s, "/a?b=1", &[("Host", "")]),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
                assert_ne!(a.bytes(), b.bytes());
            }
        }
        let h = spec(&["path", "header:X-A", "header:X-B"]);
        assert_ne!(
            k(&h, "/", &[("X-A", "1"), ("X-B", "")]),
            k(&h, "/", &[("X-A", ""), ("X-B", "1")])
        );
        assert_ne!(
            k(&h, "/", &[("X-A", "")]),
            k(&h, "/", &[]),
            "empty is not absent"
        );
    }

    #[test]
    fn the_scheme_is_part_of_the_default_key() {
        let s = default();
        let r = req("/", &[("Host", "ex.com")]);
        assert_ne!(s.key(&r, "http"), s.key(&r, "https"));
    }

    #[test]
    fn the_host_is_lowercased_and_the_default_port_removed_rfc3986_6_2() {
        let s = default();
        let a = s.key(&req("/", &[("Host", "Ex.COM:80")]), "http");
        assert_eq!(a, s.key(&req("/", &[("Host", "ex.com")]), "http"));
        assert_eq!(a, s.key(&req("/", &[("Host", "ex.com:")]), "http"));
        assert_ne!(a, s.key(&req("/", &[("Host", "ex.com:8080")]), "http"));
        let b = s.key(&req("/", &[("Host", "ex.com:443")]), "https");
        assert_eq!(b, s.key(&req("/", &[("Host", "ex.com")]), "https"));
        assert_ne!(
            s.key(&req("/", &[("Host", "ex.com:80")]), "https"),
            s.key(&req("/", &[("Host", "ex.com")]), "https")
        );
        let mut out = Vec::new();
        normal_host(b"[::1]:80", "http", &mut out);
        assert_eq!(out, b"[::1]");
        out.clear();
        normal_host(b"[::1]", "http", &mut out);
        assert_eq!(out, b"[::1]");
    }

    #[test]
    fn an_absolute_form_target_keys_like_its_origin_form_rfc9112_3_2_2() {
        let s = default();
        let a = s.key(
            &parsed("GET http://Ex.com/a?q HTTP/1.1\r\nHost: other\r\n\r\n"),
            "http",
        );
        let b = s.key(&req("/a?q", &[("Host", "ex.com")]), "http");
        assert_eq!(a, b);
    }

    #[test]
    fn the_method_part_tells_methods_apart() {
        let s = spec(&["method", "path"]);
        let g = s.key(&req_m(Method::Get, "/", &[]), "http");
        let h = s.key(&req_m(Method::Head, "/", &[]), "http");
        assert_ne!(g, h);
        let d = default();
        assert_eq!(
            d.key(&req_m(Method::Get, "/", &[]), "http"),
            d.key(&req_m(Method::Head, "/", &[]), "http")
        );
    }

    #[test]
    fn header_parts_take_every_line_of_the_field_case_insensitively() {
        let s = spec(&["path", "header:X-Device"]);
        assert_eq!(
            k(&s, "/", &[("x-device", "m")]),
            k(&s, "/", &[("X-DEVICE", "m")])
        );
        assert_ne!(
            k(&s, "/", &[("X-Device", "m")]),
            k(&s, "/", &[("X-Device", "d")])
        );
        assert_eq!(
            k(&s, "/", &[("X-Device", "a"), ("X-Device", "b")]),
            k(&s, "/", &[("X-Device", "a, b")])
        );
    }

    #[test]
    fn cookie_parts_take_the_named_cookie_only() {
        let s = spec(&["path", "cookie:lang"]);
        let a = k(&s, "/", &[("Cookie", "sid=1; lang=fr")]);
        assert_eq!(a, k(&s, "/", &[("Cookie", "lang=fr"), ("Cookie", "sid=2")]));
        assert_ne!(a, k(&s, "/", &[("Cookie", "lang=en")]));
        assert_ne!(
            a,
            k(&s, "/", &[("Cookie", "Lang=fr")]),
            "cookie names are case-sensitive"
        );
        assert_ne!(a, k(&s, "/", &[("Cookie", "xlang=fr")]));
        assert_eq!(k(&s, "/", &[]), k(&s, "/", &[("Cookie", "other=1")]));
    }

    #[test]
    fn arg_parts_take_the_named_query_argument_only() {
        let s = spec(&["path", "arg:page"]);
        assert_eq!(k(&s, "/?page=2&utm=x", &[]), k(&s, "/?utm=y&page=2", &[]));
        assert_ne!(k(&s, "/?page=2", &[]), k(&s, "/?page=3", &[]));
        assert_ne!(k(&s, "/?page=", &[]), k(&s, "/", &[]));
    }

    #[test]
    fn bad_key_parts_are_refused_with_their_name() {
        for bad in [
            &["scheme", "hots"][..],
            &["header:"],
            &["cookie:a b"],
            &["arg:a=b"],
            &["path", "path"],
            &[],
        ] {
            let parts: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            let e = KeySpec::parse(&parts).expect_err("refused");
            assert!(!e.is_empty());
        }
        let e = KeySpec::parse(&["hots".to_string()]).expect_err("refused");
        assert!(e.contains("hots"), "{e}");
    }

    #[test]
    fn the_url_form_is_scheme_host_path_query() {
        assert_eq!(
            url(&req("/a/b?x=1", &[("Host", "EX.com:80")]), "http"),
            "http://ex.com/a/b?x=1"
        );
        assert_eq!(
            url(&req("/a", &[("Host", "ex.com:8443")]), "https"),
            "https://ex.com:8443/a"
        );
        assert_eq!(
            url(
                &parsed("GET http://h/p? HTTP/1.1\r\nHost: h\r\n\r\n"),
                "http"
            ),
            "http://h/p?"
        );
        assert_eq!(
            url(&req("/\u{e9}", &[("Host", "h")]), "http"),
            "http://h/\u{e9}"
        );
    }

    fn bypass(c: &[&str], a: &[&str], h: &[&str]) -> Bypass {
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Bypass::new(&v(c), &v(a), &v(h)).expect("bypass")
    }

    #[test]
    fn a_cookie_matching_a_glob_bypasses_like_wordpress_rules() {
        let b = bypass(
            &["wordpress_logged_in_*", "wp-postpass_*", "comment_author_*"],
            &[],
            &[],
        );
        assert!(b.matches(&req("/", &[("Cookie", "a=1; wordpress_logged_in_abc=x")])));
        assert!(b.matches(&req("/", &[("Cookie", "wp-postpass_=1")])));
        assert!(!b.matches(&req("/", &[("Cookie", "wordpress_test_cookie=1")])));
        assert!(
            !b.matches(&req("/", &[("Cookie", "x=wordpress_logged_in_1")])),
            "values are not names"
        );
        assert!(!b.matches(&req("/", &[])));
    }

    #[test]
    fn a_query_argument_bypasses_unless_its_value_is_zero_like_nginx() {
        let b = bypass(&[], &["nocache"], &[]);
        assert!(b.matches(&req("/?nocache=1", &[])));
        assert!(b.matches(&req("/?a=b&nocache", &[])));
        assert!(!b.matches(&req("/?nocache=0", &[])));
        assert!(!b.matches(&req("/?nocachex=1", &[])));
        assert!(!b.matches(&req("/?x=nocache", &[])));
    }

    #[test]
    fn a_request_field_bypasses_when_present_and_not_empty_or_zero_like_nginx() {
        let b = bypass(&[], &[], &["X-No-Cache"]);
        assert!(b.matches(&req("/", &[("x-no-cache", "1")])));
        assert!(!b.matches(&req("/", &[("X-No-Cache", "0")])));
        assert!(!b.matches(&req("/", &[("X-No-Cache", "")])));
        assert!(!b.matches(&req("/", &[])));
        assert!(bypass(&[], &[], &[]).is_empty());
    }

    #[test]
    fn bad_bypass_names_are_refused() {
        let v = |x: &str| vec![x.to_string()];
        assert!(Bypass::new(&v("a b"), &[], &[]).is_err());
        assert!(Bypass::new(&[], &v("a=b"), &[]).is_err());
        assert!(Bypass::new(&[], &[], &v("X-*")).is_err());
        assert!(Bypass::new(&[], &[], &v("")).is_err());
    }

    #[test]
    fn globs_match_any_run_including_none() {
        assert!(glob(b"*", b""));
        assert!(glob(b"a*", b"a"));
        assert!(glob(b"a*c", b"abbbc"));
        assert!(glob(b"*b*", b"abc"));
        assert!(glob(b"a**c", b"ac"));
        assert!(!glob(b"a*c", b"abcd"));
        assert!(!glob(b"abc", b"ab"));
        assert!(!glob(b"", b"a"));
        // A pathological pattern stays fast (no exponential backtracking).
        let name = vec![b'a'; 5000];
        assert!(!glob(b"*a*a*a*a*a*b", &name));
    }
}
