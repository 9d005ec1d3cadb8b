//! Templates of values built per request from config text: a `redirect`
//! route's `Location` (`https://$host$uri`). Parsed once at load time
//! into pieces, so a request only copies; an unknown `$name` or a capture
//! the route's regex does not have is a config error, not a silent empty
//! string (nginx takes `$unknown` as an error too).

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    /// `$scheme`: `http` or `https`.
    Scheme,
    /// `$host`: the request's host name, lowercase, without its port
    /// (nginx `$host`).
    Host,
    /// `$http_host`: the Host as sent, port included (nginx `$http_host`).
    HttpHost,
    /// `$uri`: the path routing chose by (decoded, normalized, after
    /// rewrites), percent-encoded again.
    Uri,
    /// `$query` or `$args`: the query as sent, without `?`.
    Query,
    /// `$is_args`: `?` when there is a query, else nothing.
    IsArgs,
    /// `$request_uri`: the target the client sent (path and query, as sent,
    /// before any rewrite).
    RequestUri,
    /// `$1`..`$9`: a capture group of the route's `regex`.
    Capture(usize),
    /// `$remote_user`: the user the access phase authenticated (basic
    /// auth, an Authorizer's or a Lua script's `REMOTE_USER`); header
    /// templates only.
    RemoteUser,
    /// `$auth_NAME`: a variable the access phase granted (an Authorizer's
    /// `Variable-NAME`, a Lua access script's table); header templates
    /// only.
    Granted(String),
    /// `$ssl_client_*`: the client's verified certificate, as nginx names
    /// its parts; header templates only.
    Client(ClientVar),
}

/// A part of the client's certificate (nginx's `$ssl_client_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientVar {
    /// `SUCCESS` or `NONE` over TLS, empty in the clear.
    Verify,
    SubjectDn,
    IssuerDn,
    Serial,
    /// SHA-1 of the certificate, hex.
    Fingerprint,
    /// The PEM, percent-encoded.
    EscapedCert,
    Start,
    End,
    Remain,
}

impl ClientVar {
    fn named(n: &str) -> Option<ClientVar> {
        Some(match n {
            "ssl_client_verify" => ClientVar::Verify,
            "ssl_client_s_dn" => ClientVar::SubjectDn,
            "ssl_client_i_dn" => ClientVar::IssuerDn,
            "ssl_client_serial" => ClientVar::Serial,
            "ssl_client_fingerprint" => ClientVar::Fingerprint,
            "ssl_client_escaped_cert" => ClientVar::EscapedCert,
            "ssl_client_v_start" => ClientVar::Start,
            "ssl_client_v_end" => ClientVar::End,
            "ssl_client_v_remain" => ClientVar::Remain,
            _ => return None,
        })
    }

    fn value(self, v: &Vars<'_>) -> String {
        use crate::http::client_cert::ClientCert;
        let Some(c): Option<&ClientCert> = v.client_cert else {
            return match self {
                ClientVar::Verify if v.scheme == "https" => "NONE".into(),
                _ => String::new(),
            };
        };
        match self {
            ClientVar::Verify => "SUCCESS".into(),
            ClientVar::SubjectDn => c.subject.clone(),
            ClientVar::IssuerDn => c.issuer.clone(),
            ClientVar::Serial => c.serial.clone(),
            ClientVar::Fingerprint => c.fingerprint_sha1(),
            ClientVar::EscapedCert => c.escaped_pem(),
            ClientVar::Start => c.v_start(),
            ClientVar::End => c.v_end(),
            ClientVar::Remain => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                c.v_remain(now).to_string()
            }
        }
    }
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    pieces: Vec<Piece>,
    /// The highest capture group used (0: none).
    max_capture: usize,
}

/// What a template is expanded with.
pub(crate) struct Vars<'a> {
    pub scheme: &'a str,
    /// The `Host` (or an absolute-form target's authority) as sent.
    pub host: Option<&'a [u8]>,
    /// The decoded, normalized path.
    pub uri: &'a str,
    pub query: Option<&'a [u8]>,
    pub request_uri: &'a [u8],
    /// The route regex's captures on `uri`, when the route has one.
    pub captures: Option<regex::Captures<'a>>,
    /// What the access phase granted (`$remote_user`, `$auth_NAME`).
    pub granted: &'a [(String, Vec<u8>)],
    /// The client's verified TLS certificate (`$ssl_client_*`).
    pub client_cert: Option<&'a crate::http::client_cert::ClientCert>,
}

/// Names a template may use, for messages and docs.
const NAMES: &str =
    "$scheme, $host, $http_host, $uri, $query, $args, $is_args, $request_uri, $1..$9, $$";

impl Template {
    /// Parses `text`. `groups` is how many capture groups the route's
    /// regex has (0 without a regex route): `$N` beyond it is refused.
    pub(crate) fn parse(text: &str, groups: usize) -> Result<Template, String> {
        Template::parse_in(text, groups, false)
    }

    /// [`Template::parse`] for a header value, which may also name what
    /// the access phase granted: `$remote_user`, `$auth_NAME`.
    pub(crate) fn parse_header(text: &str, groups: usize) -> Result<Template, String> {
        Template::parse_in(text, groups, true)
    }

    fn parse_in(text: &str, groups: usize, identity: bool) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut lit = String::new();
        let mut max_capture = 0;
        let mut rest = text;
        while let Some(i) = rest.find('$') {
            lit.push_str(&rest[..i]);
            rest = &rest[i + 1..];
            if let Some(r) = rest.strip_prefix('$') {
                lit.push('$');
                rest = r;
                continue;
            }
            // `${name}` separates a name from the letters after it.
            let (name, after) = if let Some(r) = rest.strip_prefix('{') {
                let end = r
                    .find('}')
                    .ok_or_else(|| format!("`{text}`: `${{` without its `}}`"))?;
                (&r[..end], &r[end + 1..])
            } else if rest.starts_with(|c: char| c.is_ascii_digit()) {
                // One digit, as nginx: `$10` is `$1` then `0`.
                rest.split_at(1)
            } else {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                rest.split_at(end)
            };
            let piece = if let Some(c) = ClientVar::named(name).filter(|_| identity) {
                Piece::Client(c)
            } else {
                match name {
                    "scheme" => Piece::Scheme,
                    "host" => Piece::Host,
                    "http_host" => Piece::HttpHost,
                    "uri" => Piece::Uri,
                    "query" | "args" => Piece::Query,
                    "is_args" => Piece::IsArgs,
                    "request_uri" => Piece::RequestUri,
                    "remote_user" if identity => Piece::RemoteUser,
                    n if identity && n.len() > 5 && n.starts_with("auth_") => {
                        Piece::Granted(n[5..].to_owned())
                    }
                    n if n.len() == 1 && n.as_bytes()[0].is_ascii_digit() => {
                        let g = usize::from(n.as_bytes()[0] - b'0');
                        if g == 0 || g > groups {
                            return Err(if groups == 0 {
                                format!(
                                    "`{text}`: `${n}` needs a `regex` route with capture groups"
                                )
                            } else {
                                format!(
                                "`{text}`: `${n}`: the route's regex has {groups} capture group(s)"
                            )
                            });
                        }
                        max_capture = max_capture.max(g);
                        Piece::Capture(g)
                    }
                    "" => {
                        return Err(format!(
                            "`{text}`: a `$` without a name (write `$$` for `$`)"
                        ))
                    }
                    n => {
                        return Err(format!(
                            "`{text}`: unknown variable `${n}` (known: {NAMES}{})",
                            if identity {
                                ", $remote_user, $auth_NAME, $ssl_client_verify, $ssl_client_s_dn, \
                             $ssl_client_i_dn, $ssl_client_serial, $ssl_client_fingerprint, \
                             $ssl_client_escaped_cert, $ssl_client_v_start, $ssl_client_v_end, \
                             $ssl_client_v_remain"
                            } else {
                                ""
                            }
                        ))
                    }
                }
            };
            if !lit.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut lit)));
            }
            pieces.push(piece);
            rest = after;
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            pieces.push(Piece::Text(lit));
        }
        if let Some(Piece::Text(t)) = pieces.iter().find(|p| match p {
            Piece::Text(t) => t.bytes().any(|b| b.is_ascii_control()),
            _ => false,
        }) {
            return Err(format!("`{t}`: control characters cannot go in a header"));
        }
        Ok(Template {
            pieces,
            max_capture,
        })
    }

    /// Whether the template reads the client's certificate.
    pub(crate) fn uses_client_cert(&self) -> bool {
        self.pieces.iter().any(|p| matches!(p, Piece::Client(_)))
    }

    /// Whether the template reads regex captures.
    pub(crate) fn uses_captures(&self) -> bool {
        self.max_capture > 0
    }

    /// The value for one request, or None when it cannot be made: `$host`
    /// or `$http_host` without a plain host name (a missing Host, a
    /// name with characters no host name has), or a control character
    /// from the request that would break the header.
    pub(crate) fn expand(&self, v: &Vars<'_>) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(128);
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.extend_from_slice(t.as_bytes()),
                Piece::Scheme => out.extend_from_slice(v.scheme.as_bytes()),
                Piece::Host => {
                    let h = crate::http::host_name(v.host);
                    if !is_plain_host(h) {
                        return None;
                    }
                    out.extend(h.bytes().map(|b| b.to_ascii_lowercase()));
                }
                Piece::HttpHost => {
                    let raw = v.host?;
                    let (h, port) = split_port(raw)?;
                    if !is_plain_host(h) {
                        return None;
                    }
                    out.extend_from_slice(h.as_bytes());
                    if let Some(p) = port {
                        out.push(b':');
                        out.extend_from_slice(p);
                    }
                }
                Piece::Uri => push_encoded(&mut out, v.uri),
                Piece::Query => out.extend_from_slice(v.query.unwrap_or(b"")),
                Piece::IsArgs => {
                    if v.query.is_some_and(|q| !q.is_empty()) {
                        out.push(b'?');
                    }
                }
                Piece::RequestUri => out.extend_from_slice(v.request_uri),
                Piece::Capture(g) => {
                    if let Some(m) = v.captures.as_ref().and_then(|c| c.get(*g)) {
                        push_encoded(&mut out, m.as_str());
                    }
                }
                Piece::RemoteUser => out.extend_from_slice(granted(v, "REMOTE_USER")),
                Piece::Granted(n) => out.extend_from_slice(granted(v, n)),
                Piece::Client(c) => out.extend_from_slice(c.value(v).as_bytes()),
            }
        }
        // What came from the request is checked here: the parsers refuse
        // control characters in targets, but a header built from them
        // must not depend on that.
        if out.iter().any(|&b| b.is_ascii_control()) {
            return None;
        }
        Some(out)
    }
}

/// The last value the access phase granted under `name` (names compared
/// as HTTP field names are, since an Authorizer's come from fields).
fn granted<'v>(v: &Vars<'v>, name: &str) -> &'v [u8] {
    v.granted
        .iter()
        .rev()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map_or(&b""[..], |(_, val)| val)
}

/// Decoded path text percent-encoded again (unreserved characters and
/// `/` kept): a `Location` is a URI reference (RFC 9110 §10.2.2), and
/// this keeps a decoded `%0d%0a` or space from reaching the header raw.
fn push_encoded(out: &mut Vec<u8>, s: &str) {
    let mut e = String::new();
    crate::http::path::encode_into(s, &mut e);
    out.extend_from_slice(e.as_bytes());
}

/// A host and its port (`example.com:8080`, `[::1]:8080`) split, the
/// port checked to be digits.
fn split_port(raw: &[u8]) -> Option<(&str, Option<&[u8]>)> {
    let h = crate::http::host_name(Some(raw));
    let rest = &raw[h.len()..];
    match rest {
        [] => Some((h, None)),
        [b':', port @ ..] if port.iter().all(u8::is_ascii_digit) => Some((h, Some(port))),
        _ => None,
    }
}

/// A host name or IP literal with nothing else in it: letters, digits,
/// `.`, `-`, `_`, or a bracketed IPv6 address. What `$host` may put into
/// a `Location` (the Host header is the client's to write).
pub(crate) fn is_plain_host(h: &str) -> bool {
    if let Some(v6) = h.strip_prefix('[') {
        return v6
            .strip_suffix(']')
            .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok());
    }
    !h.is_empty()
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::{Template, Vars};

    fn vars<'a>(uri: &'a str, query: Option<&'a [u8]>) -> Vars<'a> {
        Vars {
            scheme: "https",
            host: Some(b"Example.COM:8443"),
            uri,
            query,
            request_uri: b"/old/a%20b?x=1",
            captures: None,
            granted: &[],
            client_cert: None,
        }
    }

    fn expand(t: &str, v: &Vars<'_>) -> String {
        let t = Template::parse(t, 0).unwrap();
        String::from_utf8(t.expand(v).unwrap()).unwrap()
    }

    /// nginx's `return 301 https://$host$request_uri;`, the canonical
    /// https redirect: `$host` is lowercase without the port.
    #[test]
    fn variables_expand_as_nginx_names_them() {
        let v = vars("/old/a b", Some(b"x=1"));
        assert_eq!(
            expand("https://$host$request_uri", &v),
            "https://example.com/old/a%20b?x=1"
        );
        assert_eq!(
            expand("$scheme://$http_host$uri$is_args$args", &v),
            "https://Example.COM:8443/old/a%20b?x=1"
        );
        assert_eq!(expand("/new?$query&y=2", &v), "/new?x=1&y=2");
        assert_eq!(expand("${uri}x", &v), "/old/a%20bx");
        assert_eq!(expand("a$$b", &v), "a$b");
    }

    #[test]
    fn is_args_is_empty_without_a_query() {
        let v = vars("/p", None);
        assert_eq!(expand("$uri$is_args$args", &v), "/p");
        let v = vars("/p", Some(b""));
        assert_eq!(expand("$uri$is_args$args", &v), "/p");
    }

    /// Captures come from the decoded path and are encoded again: nginx
    /// puts `$1` into `return 301` decoded, so `/a%20b` redirects to a
    /// `Location` with a raw space in it (not a URI, RFC 3986 §2.1).
    /// Control characters never reach here: normalization refuses them.
    #[test]
    fn captures_are_percent_encoded_and_one_digit_long() {
        let re = regex::Regex::new(r"^/blog/(\d+)/(.*)$").unwrap();
        let uri = "/blog/42/a b:c";
        let t = Template::parse("/posts/$2?id=$10", re.captures_len() - 1).unwrap();
        assert!(t.uses_captures());
        let mut v = vars(uri, None);
        v.captures = re.captures(uri);
        let out = String::from_utf8(t.expand(&v).unwrap()).unwrap();
        assert_eq!(out, "/posts/a%20b%3Ac?id=420");
    }

    #[test]
    fn unknown_names_and_missing_groups_are_config_errors() {
        for (t, groups, why) in [
            ("/x/$nope", 0, "unknown variable `$nope`"),
            ("/x/$1", 0, "needs a `regex` route"),
            ("/x/$3", 2, "has 2 capture group"),
            ("/x/$0", 2, "has 2 capture group"),
            ("/x/$", 0, "without a name"),
            ("/x/${uri", 0, "without its"),
            ("/x/\r\n", 0, "control characters"),
        ] {
            let e = Template::parse(t, groups).unwrap_err();
            assert!(e.contains(why), "{t}: {e}");
        }
    }

    /// A Host that is not a plain name gives no value: the redirect is
    /// refused (400) rather than sent somewhere the client chose oddly.
    #[test]
    fn a_host_that_is_not_a_plain_name_gives_no_location() {
        let t = Template::parse("https://$host/", 0).unwrap();
        for bad in [&b"a b"[..], b"a/b", b"", b"[zz]", b"x@y"] {
            let mut v = vars("/", None);
            v.host = Some(bad);
            assert_eq!(t.expand(&v), None, "{:?}", String::from_utf8_lossy(bad));
        }
        let mut v = vars("/", None);
        v.host = None;
        assert_eq!(t.expand(&v), None);
        v.host = Some(b"[::1]:8080");
        assert_eq!(t.expand(&v).unwrap(), b"https://[::1]/");
        let t = Template::parse("https://$http_host/", 0).unwrap();
        assert_eq!(t.expand(&v).unwrap(), b"https://[::1]:8080/");
        v.host = Some(b"a:80x");
        assert_eq!(t.expand(&v), None);
    }

    #[test]
    fn a_query_with_a_control_character_gives_no_location() {
        let t = Template::parse("/x?$args", 0).unwrap();
        let v = vars("/", Some(b"a\nb"));
        assert_eq!(t.expand(&v), None);
    }

    /// nginx `proxy_set_header X-Remote-User $remote_user`: header
    /// templates also read what the access phase granted; a redirect's do
    /// not (it has none to read), and an unset variable is empty.
    #[test]
    fn header_templates_read_the_user_and_granted_variables() {
        let granted = [
            ("REMOTE_USER".to_owned(), b"alice".to_vec()),
            ("Team".to_owned(), b"ops".to_vec()),
        ];
        let mut v = vars("/p", None);
        v.granted = &granted;
        let t = Template::parse_header("$remote_user/${auth_team}/$auth_none.", 0).unwrap();
        assert_eq!(t.expand(&v).unwrap(), b"alice/ops/.");
        assert!(Template::parse("$remote_user", 0).is_err());
        assert!(Template::parse("$auth_x", 0).is_err());
    }

    /// nginx's `$ssl_client_verify` is `NONE` over TLS without a
    /// certificate and empty in the clear; the other `$ssl_client_*` are
    /// empty without one (so a `set` field is left out). Header templates
    /// only, as `$remote_user`.
    #[test]
    fn ssl_client_variables_expand_as_nginx_gives_them() {
        let t = Template::parse_header("$ssl_client_verify|$ssl_client_s_dn|$ssl_client_serial", 0)
            .unwrap();
        let mut v = vars("/", None);
        assert_eq!(t.expand(&v).unwrap(), b"NONE||");
        v.scheme = "http";
        assert_eq!(t.expand(&v).unwrap(), b"||");
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "alice\nX-Injected: 1");
        p.serial_number = Some(rcgen::SerialNumber::from_slice(&[0x10, 0x01]));
        let key = rcgen::KeyPair::generate().unwrap();
        let der = p.self_signed(&key).unwrap().der().to_vec();
        let c = crate::http::client_cert::ClientCert::from_der(&der, None);
        v.scheme = "https";
        v.client_cert = Some(&c);
        assert_eq!(
            t.expand(&v).unwrap(),
            &b"SUCCESS|CN=alice\\0AX-Injected: 1|1001"[..],
            "a line break in a name is escaped, never sent raw"
        );
        assert!(Template::parse("$ssl_client_s_dn", 0).is_err());
    }
}
