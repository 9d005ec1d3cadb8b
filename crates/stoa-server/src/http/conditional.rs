//! Conditional requests: the preconditions of RFC 9110 §13.1, evaluated in
//! the order of §13.2.2, and If-Range (§13.1.5).
//!
//! The static handler calls [`evaluate`] only for a representation that
//! exists, so "*" always matches. The validators are the file's strong
//! entity tag and its modification time in whole seconds.

use std::time::UNIX_EPOCH;

/// What the preconditions say to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No precondition failed: perform the method.
    Proceed,
    /// 304 Not Modified (GET/HEAD only).
    NotModified,
    /// 412 Precondition Failed.
    PreconditionFailed,
}

/// The parts of a request that preconditions look at. Each header is its
/// raw field value (lines of a repeated field joined with ", ", as RFC 9110
/// §5.3 allows for list-based fields), or None when absent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Request<'a> {
    pub is_get_or_head: bool,
    pub if_match: Option<&'a [u8]>,
    pub if_none_match: Option<&'a [u8]>,
    pub if_modified_since: Option<&'a [u8]>,
    pub if_unmodified_since: Option<&'a [u8]>,
}

/// Evaluates the preconditions of `req` against the current validators,
/// in the order of RFC 9110 §13.2.2.
///
/// `etag` is the current entity tag with its quotes (normally strong, e.g.
/// `"5f3a-54c"`); `last_modified` is in seconds since the Unix epoch.
///
/// An If-Match or If-None-Match value that is not a valid list of entity
/// tags matches nothing: If-Match then fails (412), which is the safe
/// answer for a request that wanted a guarantee it cannot get, and
/// If-None-Match lets the request proceed. Dates that do not parse are
/// ignored, as §13.1.3 and §13.1.4 require. No current clock is consulted,
/// so an If-Modified-Since in the future is taken at its word.
pub fn evaluate(req: &Request, etag: &[u8], last_modified: u64) -> Outcome {
    // Step 1 (§13.1.1), else step 2 (§13.1.4: ignored when If-Match is
    // present).
    if let Some(v) = req.if_match {
        if !if_match(v, etag) {
            return Outcome::PreconditionFailed;
        }
    } else if let Some(date) = req.if_unmodified_since.and_then(parse_date) {
        if last_modified > date {
            return Outcome::PreconditionFailed;
        }
    }
    // Step 3 (§13.1.2), else step 4 (§13.1.3: only for GET/HEAD, and
    // ignored when If-None-Match is present, because entity tags are the
    // more accurate validator).
    if let Some(v) = req.if_none_match {
        if !if_none_match(v, etag) {
            return if req.is_get_or_head {
                Outcome::NotModified
            } else {
                Outcome::PreconditionFailed
            };
        }
    } else if req.is_get_or_head {
        if let Some(date) = req.if_modified_since.and_then(parse_date) {
            if last_modified <= date {
                return Outcome::NotModified;
            }
        }
    }
    Outcome::Proceed
}

/// If-Range (RFC 9110 §13.1.5): whether the Range header should be
/// honoured. The caller evaluates it only for a GET that has a Range header
/// and, when this returns false, sends the whole representation with 200.
///
/// An entity tag must match strongly, so a weak one never matches (a client
/// must not send one, and byte ranges of a weakly-equal representation
/// could splice two different files). An HTTP-date must equal
/// `last_modified` exactly. Anything invalid is false, which is always safe:
/// the client gets the full representation.
pub fn if_range_matches(value: &[u8], etag: &[u8], last_modified: u64) -> bool {
    let v = trim_ows(value);
    if v.starts_with(b"\"") || v.starts_with(b"W/") {
        match parse_entity_tag(v) {
            Some((tag, [])) => strong_match(tag, EntityTag::of(etag)),
            _ => false,
        }
    } else {
        parse_date(v) == Some(last_modified)
    }
}

/// If-Match (§13.1.1): true when "*" (the representation exists) or when
/// one listed tag matches the current one with strong comparison.
fn if_match(value: &[u8], etag: &[u8]) -> bool {
    if trim_ows(value) == b"*" {
        return true;
    }
    let current = EntityTag::of(etag);
    list_any(value, |t| strong_match(t, current)).unwrap_or(false)
}

/// If-None-Match (§13.1.2): false when "*" or when one listed tag matches
/// the current one with weak comparison; true otherwise.
fn if_none_match(value: &[u8], etag: &[u8]) -> bool {
    if trim_ows(value) == b"*" {
        return false;
    }
    let current = EntityTag::of(etag);
    !list_any(value, |t| t.opaque == current.opaque).unwrap_or(false)
}

/// An entity-tag (RFC 9110 §8.8.3); `opaque` keeps its quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EntityTag<'a> {
    weak: bool,
    opaque: &'a [u8],
}

impl<'a> EntityTag<'a> {
    /// Our own tag, trusted to be well formed: only the weakness prefix
    /// matters.
    fn of(etag: &'a [u8]) -> Self {
        match etag.strip_prefix(b"W/") {
            Some(opaque) => EntityTag { weak: true, opaque },
            None => EntityTag {
                weak: false,
                opaque: etag,
            },
        }
    }
}

/// Strong comparison (§8.8.3.2): neither tag weak, opaque tags identical.
fn strong_match(a: EntityTag, b: EntityTag) -> bool {
    !a.weak && !b.weak && a.opaque == b.opaque
}

/// Parses one entity-tag at the start of `s`, returning it and the rest.
///
/// entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, with etagc = %x21 / %x23-7E
/// / obs-text. "W/" is case-sensitive. Commas are etagc, which is why
/// lists cannot simply be split on ','.
fn parse_entity_tag(s: &[u8]) -> Option<(EntityTag<'_>, &[u8])> {
    let (weak, s) = match s.strip_prefix(b"W/") {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    if s.first() != Some(&b'"') {
        return None;
    }
    let close = 1 + s[1..].iter().position(|&b| b == b'"')?;
    let inner = &s[1..close];
    if !inner
        .iter()
        .all(|&b| b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80)
    {
        return None;
    }
    Some((
        EntityTag {
            weak,
            opaque: &s[..=close],
        },
        &s[close + 1..],
    ))
}

/// Whether any tag in a `1#entity-tag` list satisfies `pred`; None when
/// the list is not valid (including when it has no element at all).
///
/// The whole list is checked even after a match, so that the answer does
/// not depend on where the garbage is. Empty elements and OWS around commas
/// are accepted (RFC 9110 §5.6.1.2).
fn list_any(value: &[u8], mut pred: impl FnMut(EntityTag) -> bool) -> Option<bool> {
    let mut s = value;
    let mut seen = false;
    let mut found = false;
    loop {
        while let [b' ' | b'\t' | b',', rest @ ..] = s {
            s = rest;
        }
        if s.is_empty() {
            break;
        }
        let (tag, rest) = parse_entity_tag(s)?;
        seen = true;
        found |= pred(tag);
        s = trim_ows(rest);
        if !(s.is_empty() || s[0] == b',') {
            return None;
        }
    }
    seen.then_some(found)
}

/// An HTTP-date (RFC 9110 §5.6.7, all three formats) as Unix seconds; None
/// when invalid, including a list of dates.
fn parse_date(value: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(value).ok()?;
    let t = httpdate::parse_http_date(s).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs())
}

/// OWS = *( SP / HTAB ) (RFC 9110 §5.6.3).
fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const ETAG: &[u8] = b"\"5f3a-54c\"";
    /// Sun, 06 Nov 1994 08:49:37 GMT, the RFC's example date.
    const LM: u64 = 784_111_777;
    const LM_DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";
    const BEFORE: &[u8] = b"Sun, 06 Nov 1994 08:49:36 GMT";
    const AFTER: &[u8] = b"Sun, 06 Nov 1994 08:49:38 GMT";

    fn get() -> Request<'static> {
        Request {
            is_get_or_head: true,
            ..Request::default()
        }
    }

    fn put() -> Request<'static> {
        Request::default()
    }

    fn eval(req: Request) -> Outcome {
        evaluate(&req, ETAG, LM)
    }

    use Outcome::{NotModified, PreconditionFailed, Proceed};

    #[test]
    fn no_preconditions_proceed() {
        assert_eq!(eval(get()), Proceed);
        assert_eq!(eval(put()), Proceed);
    }

    #[test]
    fn rfc9110_13_1_1_if_match_strong_comparison() {
        let im = |v: &'static [u8]| Request {
            if_match: Some(v),
            ..put()
        };
        assert_eq!(eval(im(b"\"5f3a-54c\"")), Proceed);
        assert_eq!(eval(im(b"\"other\"")), PreconditionFailed);
        // A weak tag never matches strongly.
        assert_eq!(eval(im(b"W/\"5f3a-54c\"")), PreconditionFailed);
        // Lists.
        assert_eq!(eval(im(b"\"a\", \"5f3a-54c\"")), Proceed);
        assert_eq!(eval(im(b"\"a\",\"b\"")), PreconditionFailed);
        // Comparison is exact: case and quotes matter.
        assert_eq!(eval(im(b"\"5F3A-54C\"")), PreconditionFailed);
        assert_eq!(eval(im(b"5f3a-54c")), PreconditionFailed);
    }

    #[test]
    fn rfc9110_13_1_1_if_match_star_matches_an_existing_representation() {
        let req = Request {
            if_match: Some(b"*"),
            ..put()
        };
        assert_eq!(eval(req), Proceed);
        let req = Request {
            if_match: Some(b" * "),
            ..get()
        };
        assert_eq!(eval(req), Proceed);
    }

    #[test]
    fn rfc9110_13_1_1_invalid_if_match_fails() {
        for v in [
            &b""[..],
            b" ",
            b",",
            b"\"5f3a-54c",
            b"*, \"5f3a-54c\"",
            b"\"5f3a-54c\" x",
        ] {
            let req = Request {
                if_match: Some(v),
                ..put()
            };
            assert_eq!(eval(req), PreconditionFailed, "{:?}", v.escape_ascii());
        }
        // Garbage after a match still invalidates the list.
        let req = Request {
            if_match: Some(b"\"5f3a-54c\", junk"),
            ..put()
        };
        assert_eq!(eval(req), PreconditionFailed);
    }

    #[test]
    fn rfc9110_13_1_1_if_match_applies_to_get_too() {
        let req = Request {
            if_match: Some(b"\"nope\""),
            ..get()
        };
        assert_eq!(eval(req), PreconditionFailed);
    }

    #[test]
    fn rfc9110_13_1_2_if_none_match_weak_comparison() {
        let inm = |v: &'static [u8]| Request {
            if_none_match: Some(v),
            ..get()
        };
        assert_eq!(eval(inm(b"\"5f3a-54c\"")), NotModified);
        assert_eq!(eval(inm(b"W/\"5f3a-54c\"")), NotModified);
        assert_eq!(eval(inm(b"\"other\"")), Proceed);
        assert_eq!(eval(inm(b"W/\"other\", \"x\"")), Proceed);
        assert_eq!(eval(inm(b"\"x\", W/\"5f3a-54c\"")), NotModified);
        // "w/" is not the weakness indicator, so this is invalid.
        assert_eq!(eval(inm(b"w/\"5f3a-54c\"")), Proceed);
    }

    #[test]
    fn rfc9110_13_1_2_weak_current_tag_matches_weakly() {
        let req = Request {
            if_none_match: Some(b"\"5f3a-54c\""),
            ..get()
        };
        assert_eq!(evaluate(&req, b"W/\"5f3a-54c\"", LM), NotModified);
        // But never strongly.
        let req = Request {
            if_match: Some(b"W/\"5f3a-54c\""),
            ..put()
        };
        assert_eq!(evaluate(&req, b"W/\"5f3a-54c\"", LM), PreconditionFailed);
    }

    #[test]
    fn rfc9110_13_1_2_if_none_match_star() {
        let req = Request {
            if_none_match: Some(b"*"),
            ..get()
        };
        assert_eq!(eval(req), NotModified);
        // "If-None-Match: *" on a PUT is the "create only" guard.
        let req = Request {
            if_none_match: Some(b"*"),
            ..put()
        };
        assert_eq!(eval(req), PreconditionFailed);
    }

    #[test]
    fn rfc9110_13_2_2_step3_if_none_match_fails_with_412_for_other_methods() {
        let req = Request {
            if_none_match: Some(b"\"5f3a-54c\""),
            ..put()
        };
        assert_eq!(eval(req), PreconditionFailed);
    }

    #[test]
    fn rfc9110_13_1_2_invalid_if_none_match_proceeds() {
        for v in [
            &b""[..],
            b"5f3a-54c",
            b"\"5f3a-54c",
            b"\"5f3a-54c\" junk",
            b"\"a b\"",
        ] {
            let req = Request {
                if_none_match: Some(v),
                ..get()
            };
            assert_eq!(eval(req), Proceed, "{:?}", v.escape_ascii());
        }
    }

    #[test]
    fn rfc9110_8_8_3_commas_inside_quoted_tags() {
        let etag = b"\"a,b\"";
        let req = Request {
            if_none_match: Some(b"\"x,y\", \"a,b\""),
            ..get()
        };
        assert_eq!(evaluate(&req, etag, LM), NotModified);
        let req = Request {
            if_match: Some(b"\"a\", \"b\""),
            ..put()
        };
        assert_eq!(evaluate(&req, etag, LM), PreconditionFailed);
        let req = Request {
            if_match: Some(b"\"a,b\""),
            ..put()
        };
        assert_eq!(evaluate(&req, etag, LM), Proceed);
    }

    #[test]
    fn rfc9110_5_6_1_2_lists_tolerate_ows_and_empty_elements() {
        for v in [
            &b" \"x\" , \"5f3a-54c\" "[..],
            b"\t\"x\"\t,\t\"5f3a-54c\"",
            b",\"5f3a-54c\"",
            b"\"x\",,\"5f3a-54c\",",
            b"\"x\",\"5f3a-54c\"",
        ] {
            let req = Request {
                if_none_match: Some(v),
                ..get()
            };
            assert_eq!(eval(req), NotModified, "{:?}", v.escape_ascii());
        }
    }

    #[test]
    fn obs_text_is_allowed_in_entity_tags() {
        let etag = b"\"caf\xc3\xa9\"";
        let req = Request {
            if_match: Some(b"\"caf\xc3\xa9\""),
            ..put()
        };
        assert_eq!(evaluate(&req, etag, LM), Proceed);
    }

    #[test]
    fn rfc9110_13_1_3_if_modified_since() {
        let ims = |v: &'static [u8]| Request {
            if_modified_since: Some(v),
            ..get()
        };
        assert_eq!(eval(ims(LM_DATE)), NotModified);
        assert_eq!(eval(ims(AFTER)), NotModified);
        assert_eq!(eval(ims(BEFORE)), Proceed);
        // The obsolete formats are accepted too (§5.6.7).
        assert_eq!(eval(ims(b"Sunday, 06-Nov-94 08:49:37 GMT")), NotModified);
        assert_eq!(eval(ims(b"Sun Nov  6 08:49:37 1994")), NotModified);
    }

    #[test]
    fn rfc9110_13_1_3_invalid_if_modified_since_is_ignored() {
        for v in [
            &b""[..],
            b"yesterday",
            b"Sun, 06 Nov 1994 08:49:37",
            b"Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 08:49:37 GMT\xff",
            b"Sun, 32 Nov 1994 08:49:37 GMT",
        ] {
            let req = Request {
                if_modified_since: Some(v),
                ..get()
            };
            assert_eq!(eval(req), Proceed, "{:?}", v.escape_ascii());
        }
    }

    #[test]
    fn rfc9110_13_1_3_if_modified_since_only_for_get_and_head() {
        let req = Request {
            if_modified_since: Some(AFTER),
            ..put()
        };
        assert_eq!(eval(req), Proceed);
    }

    #[test]
    fn rfc9110_13_1_3_if_none_match_overrides_if_modified_since() {
        // The tag does not match, so the request proceeds even though the
        // date alone would have given 304.
        let req = Request {
            if_none_match: Some(b"\"other\""),
            if_modified_since: Some(AFTER),
            ..get()
        };
        assert_eq!(eval(req), Proceed);
        // And an invalid If-None-Match still counts as present.
        let req = Request {
            if_none_match: Some(b"garbage"),
            if_modified_since: Some(AFTER),
            ..get()
        };
        assert_eq!(eval(req), Proceed);
        // The tag matches while the date says modified: 304 anyway.
        let req = Request {
            if_none_match: Some(ETAG),
            if_modified_since: Some(BEFORE),
            ..get()
        };
        assert_eq!(eval(req), NotModified);
    }

    #[test]
    fn rfc9110_13_1_4_if_unmodified_since() {
        let ius = |v: &'static [u8]| Request {
            if_unmodified_since: Some(v),
            ..put()
        };
        assert_eq!(eval(ius(LM_DATE)), Proceed);
        assert_eq!(eval(ius(AFTER)), Proceed);
        assert_eq!(eval(ius(BEFORE)), PreconditionFailed);
        // Applies to GET as well.
        let req = Request {
            if_unmodified_since: Some(BEFORE),
            ..get()
        };
        assert_eq!(eval(req), PreconditionFailed);
    }

    #[test]
    fn rfc9110_13_1_4_invalid_if_unmodified_since_is_ignored() {
        for v in [
            &b"not a date"[..],
            b"",
            b"Sun, 06 Nov 1994 08:49:36 GMT, Sun, 06 Nov 1994 08:49:36 GMT",
        ] {
            let req = Request {
                if_unmodified_since: Some(v),
                ..put()
            };
            assert_eq!(eval(req), Proceed, "{:?}", v.escape_ascii());
        }
    }

    #[test]
    fn rfc9110_13_1_4_if_match_overrides_if_unmodified_since() {
        let req = Request {
            if_match: Some(ETAG),
            if_unmodified_since: Some(BEFORE),
            ..put()
        };
        assert_eq!(eval(req), Proceed);
    }

    #[test]
    fn rfc9110_13_2_2_if_match_is_evaluated_before_if_none_match() {
        // Step 1 fails first: 412, not 304.
        let req = Request {
            if_match: Some(b"\"other\""),
            if_none_match: Some(ETAG),
            ..get()
        };
        assert_eq!(eval(req), PreconditionFailed);
        // Step 1 passes, step 3 gives 304.
        let req = Request {
            if_match: Some(ETAG),
            if_none_match: Some(ETAG),
            ..get()
        };
        assert_eq!(eval(req), NotModified);
    }

    #[test]
    fn rfc9110_13_2_2_if_unmodified_since_is_evaluated_before_if_modified_since() {
        let req = Request {
            if_unmodified_since: Some(BEFORE),
            if_modified_since: Some(AFTER),
            ..get()
        };
        assert_eq!(eval(req), PreconditionFailed);
        let req = Request {
            if_unmodified_since: Some(AFTER),
            if_modified_since: Some(AFTER),
            ..get()
        };
        assert_eq!(eval(req), NotModified);
    }

    #[test]
    fn rfc9110_13_1_5_if_range_entity_tag_must_match_strongly() {
        assert!(if_range_matches(ETAG, ETAG, LM));
        assert!(if_range_matches(b" \"5f3a-54c\" ", ETAG, LM));
        assert!(!if_range_matches(b"\"other\"", ETAG, LM));
        assert!(!if_range_matches(b"W/\"5f3a-54c\"", ETAG, LM));
        assert!(!if_range_matches(ETAG, b"W/\"5f3a-54c\"", LM));
    }

    #[test]
    fn rfc9110_13_1_5_if_range_is_one_validator_not_a_list() {
        assert!(!if_range_matches(b"\"5f3a-54c\", \"x\"", ETAG, LM));
        assert!(!if_range_matches(b"*", ETAG, LM));
    }

    #[test]
    fn rfc9110_13_1_5_if_range_date_must_match_exactly() {
        assert!(if_range_matches(LM_DATE, ETAG, LM));
        assert!(!if_range_matches(BEFORE, ETAG, LM));
        assert!(!if_range_matches(AFTER, ETAG, LM));
    }

    #[test]
    fn rfc9110_13_1_5_invalid_if_range_is_false() {
        for v in [&b""[..], b"garbage", b"\"5f3a-54c", b"5f3a-54c", b"\xff"] {
            assert!(!if_range_matches(v, ETAG, LM), "{:?}", v.escape_ascii());
        }
    }

    #[test]
    fn epoch_is_a_valid_date() {
        let req = Request {
            if_modified_since: Some(b"Thu, 01 Jan 1970 00:00:00 GMT"),
            ..get()
        };
        assert_eq!(evaluate(&req, ETAG, 0), NotModified);
        assert_eq!(evaluate(&req, ETAG, 1), Proceed);
    }
}
