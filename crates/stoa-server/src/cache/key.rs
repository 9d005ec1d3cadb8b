//! STAND-IN until the policy branch's key.rs merges: the cache key of a
//! request from the route's key parts, and bypass rules.

use stoa_h1::RequestHead;

#[derive(Debug)]
pub(crate) struct KeySpec {
    parts: Vec<Part>,
}

#[derive(Debug)]
enum Part {
    Scheme,
    Host,
    Path,
    Query,
    Method,
    Header(String),
    Cookie(String),
    Arg(String),
}

/// A request's primary cache key (full bytes, compared whole).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key(pub(crate) Vec<u8>);

impl KeySpec {
    pub(crate) fn parse(parts: &[String]) -> Result<KeySpec, String> {
        let mut out = Vec::new();
        for p in parts {
            out.push(match p.as_str() {
                "scheme" => Part::Scheme,
                "host" => Part::Host,
                "path" => Part::Path,
                "query" => Part::Query,
                "method" => Part::Method,
                _ => match p.split_once(':') {
                    Some(("header", n)) if !n.is_empty() => Part::Header(n.to_owned()),
                    Some(("cookie", n)) if !n.is_empty() => Part::Cookie(n.to_owned()),
                    Some(("arg", n)) if !n.is_empty() => Part::Arg(n.to_owned()),
                    _ => return Err(format!("`{p}` is not a key part")),
                },
            });
        }
        Ok(KeySpec { parts: out })
    }

    pub(crate) fn key(&self, req: &RequestHead, scheme: &str) -> Key {
        let mut k = Vec::with_capacity(64);
        for p in &self.parts {
            match p {
                Part::Scheme => k.extend_from_slice(scheme.as_bytes()),
                Part::Host => k.extend_from_slice(req.header("host").unwrap_or(b"")),
                Part::Path => k.extend_from_slice(req.path()),
                Part::Query => k.extend_from_slice(req.query().unwrap_or(b"")),
                Part::Method => {}
                Part::Header(n) => k.extend_from_slice(req.header(n).unwrap_or(b"")),
                Part::Cookie(n) => {
                    let v = req
                        .headers()
                        .filter(|(h, _)| h.eq_ignore_ascii_case(b"cookie"));
                    for (_, c) in v {
                        for kv in c.split(|&b| b == b';') {
                            let kv = stoa_h1::trim(kv);
                            if kv.len() > n.len()
                                && kv.starts_with(n.as_bytes())
                                && kv[n.len()] == b'='
                            {
                                k.extend_from_slice(&kv[n.len() + 1..]);
                            }
                        }
                    }
                }
                Part::Arg(n) => {
                    for kv in req.query().unwrap_or(b"").split(|&b| b == b'&') {
                        if kv.len() > n.len() && kv.starts_with(n.as_bytes()) && kv[n.len()] == b'='
                        {
                            k.extend_from_slice(&kv[n.len() + 1..]);
                        }
                    }
                }
            }
            k.push(0);
        }
        Key(k)
    }
}

#[derive(Debug)]
pub(crate) struct Bypass {
    headers: Vec<String>,
}

impl Bypass {
    pub(crate) fn new(
        _cookies: &[String],
        _args: &[String],
        headers: &[String],
    ) -> Result<Bypass, String> {
        Ok(Bypass {
            headers: headers.to_vec(),
        })
    }

    pub(crate) fn matches(&self, req: &RequestHead) -> bool {
        self.headers.iter().any(|h| req.header(h).is_some())
    }
}
