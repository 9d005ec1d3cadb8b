//! STAND-IN until the policy branch merges: the few RFC 9111 rules the
//! request path needs to run end to end.

use std::time::Duration;

fn field<'a>(head: &'a [u8], name: &str) -> impl Iterator<Item = &'a [u8]> + 'a {
    let name = name.as_bytes().to_vec();
    head.split(|&b| b == b'\n').filter_map(move |l| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        let c = l.iter().position(|&b| b == b':')?;
        l[..c]
            .eq_ignore_ascii_case(&name)
            .then(|| stoa_h1::trim(&l[c + 1..]))
    })
}

/// The freshness lifetime a response gives itself, if it may be stored.
pub(crate) fn storable(status: u16, head: &[u8], default_ttl: Duration) -> Option<Duration> {
    if !matches!(status, 200 | 203 | 204 | 300 | 301 | 404 | 410) {
        return None;
    }
    if field(head, "set-cookie").next().is_some() {
        return None;
    }
    let mut ttl = None;
    for v in field(head, "cache-control") {
        for d in v.split(|&b| b == b',') {
            let d = stoa_h1::trim(d);
            if d.eq_ignore_ascii_case(b"no-store") || d.eq_ignore_ascii_case(b"private") {
                return None;
            }
            if let Some(n) = d.strip_prefix(b"max-age=") {
                ttl = std::str::from_utf8(n).ok().and_then(|n| n.parse().ok());
            }
        }
    }
    match ttl {
        Some(s) => Some(Duration::from_secs(s)),
        None if !default_ttl.is_zero() => Some(default_ttl),
        None => None,
    }
}
