//! `PURGE`: removing stored responses on an application's or an
//! operator's word (Varnish's `purge` in VCL, nginx's `proxy_cache_purge`),
//! from the route's `purge` addresses only (403 and a log line otherwise;
//! an empty list lets nobody purge).
//!
//! - `PURGE /url` removes every stored variant of that URL (every key
//!   made from it: `Vary` variants, key parts from headers or cookies):
//!   200 `{"purged": N}`, or 404 when nothing was stored.
//! - `PURGE` with the request field `Surrogate-Key: a b` removes every
//!   object tagged with any of those keys (the `Surrogate-Key` the
//!   application sent, as Fastly and Varnish's xkey do): 200
//!   `{"purged": N}`, N perhaps 0 (a tag is a set that may be empty).
//!
//! The zone counts the objects removed in its `purges`.

use crate::cache::config::CacheRoute;
use crate::cache::key;
use crate::exchange::Exchange;
use crate::log::Repeats;
use std::time::Instant;
use stoa_h1::RequestHead;

/// Refused purges: logged once per interval with a count, so that a
/// client hammering PURGE cannot flood the error log.
static REFUSED: Repeats = Repeats::new(crate::log::REPEAT_INTERVAL);

/// Answers a PURGE request on a cached route.
pub(crate) fn purge(c: &CacheRoute, ex: &mut Exchange<'_>) {
    let peer = ex.peer().ip();
    if !c.purge.contains(peer) {
        if let Some(missed) = REFUSED.hit("purge refused", Instant::now()) {
            tracing::warn!(
                "PURGE {} from {peer} refused: not in the route's cache `purge` addresses ({missed} more refused since the last line)",
                String::from_utf8_lossy(ex.req().target()),
            );
        }
        ex.error(403, &[]);
        ex.finish();
        return;
    }
    let (n, by_tag) = if has_tags(ex.req()) {
        let n: usize = tags(ex.req()).map(|t| c.zone.purge_tag(t)).sum();
        (n, true)
    } else {
        let url = key::url(ex.req(), ex.scheme());
        (c.zone.purge_url(url.as_bytes()), false)
    };
    let body = answer(n as u64);
    ex.start(if n > 0 || by_tag { 200 } else { 404 });
    ex.header("Content-Type", b"application/json");
    ex.header("Cache-Control", b"no-store");
    ex.end_head(Some(body.len() as u64));
    ex.write(&body);
    ex.finish();
}

/// Whether the request names tags (a `Surrogate-Key` field, even empty:
/// a tag purge that names none removes nothing rather than the URL).
fn has_tags(req: &RequestHead) -> bool {
    req.header("surrogate-key").is_some()
}

/// The tags of every `Surrogate-Key` field: space-separated (Fastly's
/// and xkey's syntax), duplicates left in (a second purge of the same
/// tag finds nothing).
fn tags(req: &RequestHead) -> impl Iterator<Item = &[u8]> {
    req.headers()
        .filter(|(n, _)| n.eq_ignore_ascii_case(b"surrogate-key"))
        .flat_map(|(_, v)| v.split(|b| b.is_ascii_whitespace()))
        .filter(|t| !t.is_empty())
}

/// `{"purged": N}` and a newline.
fn answer(n: u64) -> Vec<u8> {
    let mut body = Vec::with_capacity(20);
    body.extend_from_slice(b"{\"purged\": ");
    stoa_h1::push_u64(&mut body, n);
    body.extend_from_slice(b"}\n");
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &[u8]) -> RequestHead {
        let mut h = RequestHead::default();
        let limits = stoa_h1::RequestLimits {
            max_head_bytes: 8192,
            max_uri_bytes: 8192,
        };
        assert!(matches!(h.parse(raw, &limits), Ok(Some(_))));
        h
    }

    /// `Surrogate-Key: a b` names tags separated by spaces (Fastly,
    /// Varnish xkey); every such field counts; without one the purge is
    /// by URL.
    #[test]
    fn surrogate_key_fields_name_space_separated_tags() {
        let h = head(
            b"PURGE / HTTP/1.1\r\nHost: h\r\nSurrogate-Key:  post-1 \t home\r\n\
              surrogate-key: feed\r\n\r\n",
        );
        assert!(has_tags(&h));
        let t: Vec<&[u8]> = tags(&h).collect();
        assert_eq!(t, [&b"post-1"[..], b"home", b"feed"]);
        let h = head(b"PURGE /a?b HTTP/1.1\r\nHost: h\r\n\r\n");
        assert!(!has_tags(&h));
        assert_eq!(tags(&h).count(), 0);
    }

    /// The answer is JSON `{"purged": N}`, as Varnish's purge examples
    /// answer with a count.
    #[test]
    fn the_answer_is_json_with_the_count() {
        let v: serde_json::Value = serde_json::from_slice(&answer(3)).expect("JSON");
        assert_eq!(v["purged"], 3);
    }
}
