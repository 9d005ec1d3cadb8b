//! Range requests: the Range header (RFC 9110 §14.1–§14.4) and the
//! multipart/byteranges body (RFC 9110 §14.6).
//!
//! [`parse`] turns a header value into half-open byte ranges already
//! clipped to the representation, so the handler only has to pick 200, 206
//! or 416. It is deliberately conservative about abuse: a request for many
//! ranges, or for the same bytes many times over (CVE-2011-3192, "Apache
//! Killer"), costs no more than a request for the whole file.

use std::fmt::Write as _;
use std::ops::Range;

/// More range-specs than this and the header is ignored (the full
/// representation is sent). RFC 9110 §14.2 lets a server ignore a Range
/// header for any reason; no legitimate client needs this many parts.
pub const MAX_RANGES: usize = 100;

/// What to do with a Range header.
#[derive(Debug, PartialEq, Eq)]
pub enum Ranges {
    /// Send the whole representation with 200: the header is invalid, names
    /// another unit, or asks for too many ranges (RFC 9110 §14.2).
    Ignore,
    /// Send these ranges with 206 (one part, or multipart/byteranges).
    /// Never empty; each range is non-empty and within the representation.
    Satisfiable(Vec<Range<u64>>),
    /// No range overlaps the representation: 416 with
    /// `Content-Range: bytes */len` (RFC 9110 §15.5.17).
    Unsatisfiable,
}

/// One syntactically valid range-spec (RFC 9110 §14.1.1), before it is
/// applied to a length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spec {
    /// `first-pos "-" [ last-pos ]`
    Int { first: u64, last: Option<u64> },
    /// `"-" suffix-length`
    Suffix(u64),
}

impl Spec {
    /// The bytes this spec selects from a representation of `len` bytes, or
    /// None when it is unsatisfiable (RFC 9110 §14.1.1).
    fn resolve(self, len: u64) -> Option<Range<u64>> {
        match self {
            // Satisfiable iff first-pos < len; last-pos is clipped to len-1.
            Spec::Int { first, last } if first < len => {
                let end = last.map_or(len, |l| l.min(len - 1) + 1);
                Some(first..end)
            }
            Spec::Int { .. } => None,
            // Satisfiable iff suffix-length > 0; a suffix longer than the
            // representation selects all of it. With len == 0 there is
            // nothing to select, so we call it unsatisfiable too.
            Spec::Suffix(n) if n > 0 && len > 0 => Some(len - n.min(len)..len),
            Spec::Suffix(_) => None,
        }
    }
}

/// Parses a Range header `value` against a representation of `len` bytes.
///
/// Returns [`Ranges::Ignore`] for anything syntactically invalid (including
/// "bytes=5-2", since RFC 9110 §14.1.1 makes last-pos < first-pos invalid,
/// and numbers that overflow u64), for units other than "bytes" (matched
/// case-insensitively, §14.1), and for more than [`MAX_RANGES`] specs.
/// Empty list elements and OWS around commas are accepted (§5.6.1.2).
///
/// Satisfiable ranges keep the order in which they were asked for, as
/// §14.6 prefers, unless two of them overlap or touch: then all of them are
/// sorted and merged (§14.2 allows coalescing), which bounds the response to
/// at most `len` bytes of content whatever the request says.
pub fn parse(value: &[u8], len: u64) -> Ranges {
    let value = trim_ows(value);
    let Some(eq) = value.iter().position(|&b| b == b'=') else {
        return Ranges::Ignore;
    };
    if !value[..eq].eq_ignore_ascii_case(b"bytes") {
        return Ranges::Ignore;
    }
    let mut out = Vec::new();
    let mut specs = 0usize;
    for elem in value[eq + 1..].split(|&b| b == b',') {
        let elem = trim_ows(elem);
        if elem.is_empty() {
            continue;
        }
        specs += 1;
        // Checked while parsing so a huge header costs no allocation.
        if specs > MAX_RANGES {
            return Ranges::Ignore;
        }
        let Some(spec) = parse_spec(elem) else {
            return Ranges::Ignore;
        };
        if let Some(r) = spec.resolve(len) {
            out.push(r);
        }
    }
    if specs == 0 {
        // "bytes=" or "bytes=,": range-set needs at least one element.
        return Ranges::Ignore;
    }
    if out.is_empty() {
        return Ranges::Unsatisfiable;
    }
    coalesce(&mut out);
    Ranges::Satisfiable(out)
}

/// Parses one range-spec (no surrounding whitespace; RFC 9110 §14.1.1 has
/// none inside one).
fn parse_spec(s: &[u8]) -> Option<Spec> {
    let dash = s.iter().position(|&b| b == b'-')?;
    let (first, last) = (&s[..dash], &s[dash + 1..]);
    if first.is_empty() {
        return Some(Spec::Suffix(parse_u64(last)?));
    }
    let first = parse_u64(first)?;
    if last.is_empty() {
        return Some(Spec::Int { first, last: None });
    }
    let last = parse_u64(last)?;
    if last < first {
        return None;
    }
    Some(Spec::Int {
        first,
        last: Some(last),
    })
}

/// `1*DIGIT` as u64; None when empty, not all digits, or too large.
fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
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

/// Merges overlapping or adjacent ranges, in place, sorting them only when
/// there is something to merge. At most [`MAX_RANGES`] ranges come in, so
/// the quadratic check for unsorted input is bounded and allocation-free.
fn coalesce(ranges: &mut Vec<Range<u64>>) {
    if ranges.len() < 2 {
        return;
    }
    let sorted = ranges.windows(2).all(|w| w[0].start <= w[1].start);
    let touching = |a: &Range<u64>, b: &Range<u64>| a.start <= b.end && b.start <= a.end;
    let needed = if sorted {
        // When sorted by start, if any pair touches then some neighbouring
        // pair does too.
        ranges.windows(2).any(|w| touching(&w[0], &w[1]))
    } else {
        ranges
            .iter()
            .enumerate()
            .any(|(i, a)| ranges[i + 1..].iter().any(|b| touching(a, b)))
    };
    if !needed {
        return;
    }
    ranges.sort_unstable_by_key(|r| r.start);
    let mut w = 0;
    for i in 1..ranges.len() {
        if ranges[i].start <= ranges[w].end {
            ranges[w].end = ranges[w].end.max(ranges[i].end);
        } else {
            w += 1;
            ranges[w] = ranges[i].clone();
        }
    }
    ranges.truncate(w + 1);
}

/// The layout of a multipart/byteranges body (RFC 9110 §14.6).
///
/// The body is, in order: for each part its head bytes followed by the
/// representation's bytes in its range; then `trailer`. `content_length`
/// is the length of all of that, for the Content-Length header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipartPlan {
    pub parts: Vec<(Vec<u8>, Range<u64>)>,
    pub trailer: Vec<u8>,
    pub content_length: u64,
}

/// Plans a multipart/byteranges body for `ranges` of a representation of
/// `total` bytes.
///
/// Each part head is "\r\n--BOUNDARY\r\nContent-Type: CT\r\nContent-Range:
/// bytes a-b/total\r\n\r\n"; the Content-Type line is left out when
/// `content_type` is empty, since §14.6 only asks for it when a 200 would
/// have carried one. The leading CRLF of the first part is a (permitted)
/// empty preamble line. `boundary` must be a valid RFC 2046 §5.1.1 boundary
/// that does not occur in the content; see [`multipart_content_type`].
/// Meant for two or more ranges: a single range is sent as a plain 206.
pub fn multipart(
    ranges: &[Range<u64>],
    total: u64,
    content_type: &str,
    boundary: &str,
) -> MultipartPlan {
    let mut parts = Vec::with_capacity(ranges.len());
    let mut content_length = 0u64;
    for r in ranges {
        let mut head =
            String::with_capacity(boundary.len() + content_type.len() + 2 * 20 + 3 * 20 + 48);
        head.push_str("\r\n--");
        head.push_str(boundary);
        head.push_str("\r\n");
        if !content_type.is_empty() {
            head.push_str("Content-Type: ");
            head.push_str(content_type);
            head.push_str("\r\n");
        }
        head.push_str("Content-Range: ");
        write_content_range(&mut head, r, total);
        head.push_str("\r\n\r\n");
        content_length = content_length
            .saturating_add(head.len() as u64)
            .saturating_add(r.end.saturating_sub(r.start));
        parts.push((head.into_bytes(), r.clone()));
    }
    let mut trailer = String::with_capacity(boundary.len() + 8);
    trailer.push_str("\r\n--");
    trailer.push_str(boundary);
    trailer.push_str("--\r\n");
    content_length = content_length.saturating_add(trailer.len() as u64);
    MultipartPlan {
        parts,
        trailer: trailer.into_bytes(),
        content_length,
    }
}

/// The response's Content-Type for a multipart/byteranges body.
pub fn multipart_content_type(boundary: &str) -> String {
    let mut s = String::with_capacity(32 + boundary.len());
    s.push_str("multipart/byteranges; boundary=");
    s.push_str(boundary);
    s
}

/// Content-Range for one part of a 206: "bytes a-b/total", with b inclusive
/// (RFC 9110 §14.4). `r` must be non-empty.
pub fn content_range(r: &Range<u64>, total: u64) -> String {
    let mut s = String::with_capacity(6 + 3 * 20 + 2);
    write_content_range(&mut s, r, total);
    s
}

fn write_content_range(s: &mut String, r: &Range<u64>, total: u64) {
    debug_assert!(r.start < r.end, "empty range {r:?}");
    // Writing to a String cannot fail.
    let _ = write!(s, "bytes {}-{}/{}", r.start, r.end.saturating_sub(1), total);
}

/// Content-Range for a 416: "bytes */total" (RFC 9110 §14.4, §15.5.17).
pub fn unsatisfied_range(total: u64) -> String {
    let mut s = String::with_capacity(8 + 20);
    let _ = write!(s, "bytes */{total}");
    s
}

#[cfg(test)]
// A list holding one range is exactly what these tests mean.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    fn sat(v: &[Range<u64>]) -> Ranges {
        Ranges::Satisfiable(v.to_vec())
    }

    #[test]
    fn rfc9110_14_1_2_examples() {
        // The examples of §14.1.2 on a 10000-byte representation.
        assert_eq!(parse(b"bytes=0-499", 10000), sat(&[0..500]));
        assert_eq!(parse(b"bytes=500-999", 10000), sat(&[500..1000]));
        assert_eq!(parse(b"bytes=-500", 10000), sat(&[9500..10000]));
        assert_eq!(parse(b"bytes=9500-", 10000), sat(&[9500..10000]));
        assert_eq!(parse(b"bytes=0-0,-1", 10000), sat(&[0..1, 9999..10000]));
        assert_eq!(
            parse(b"bytes= 0-999, 4500-5499, -1000", 10000),
            sat(&[0..1000, 4500..5500, 9000..10000])
        );
        // "bytes=500-600,601-999" touch: coalesced.
        assert_eq!(parse(b"bytes=500-600,601-999", 10000), sat(&[500..1000]));
        assert_eq!(parse(b"bytes=500-700,601-999", 10000), sat(&[500..1000]));
    }

    #[test]
    fn rfc9110_14_1_unit_is_case_insensitive() {
        assert_eq!(parse(b"BYTES=0-1", 10), sat(&[0..2]));
        assert_eq!(parse(b"Bytes=0-1", 10), sat(&[0..2]));
    }

    #[test]
    fn rfc9110_14_2_other_units_are_ignored() {
        assert_eq!(parse(b"items=0-1", 10), Ranges::Ignore);
        assert_eq!(parse(b"byte=0-1", 10), Ranges::Ignore);
        assert_eq!(parse(b"bytesx=0-1", 10), Ranges::Ignore);
        assert_eq!(parse(b"=0-1", 10), Ranges::Ignore);
        assert_eq!(parse(b"bytes 0-1", 10), Ranges::Ignore);
        assert_eq!(parse(b"bytes =0-1", 10), Ranges::Ignore);
    }

    #[test]
    fn rfc9110_14_2_invalid_headers_are_ignored() {
        for v in [
            &b""[..],
            b" ",
            b"bytes",
            b"bytes=",
            b"bytes=,",
            b"bytes= , ,",
            b"bytes=-",
            b"bytes=--1",
            b"bytes=1",
            b"bytes=a-b",
            b"bytes=1-2-3",
            b"bytes=0x1-2",
            b"bytes=+1-2",
            b"bytes=1-+2",
            b"bytes=-+2",
            b"bytes=1 -2",
            b"bytes=1- 2",
            b"bytes=0-1;2-3",
            b"bytes=0-1,x",
            b"bytes=\xff-1",
        ] {
            assert_eq!(parse(v, 10), Ranges::Ignore, "{:?}", v.escape_ascii());
        }
    }

    #[test]
    fn rfc9110_14_1_1_last_pos_before_first_pos_is_invalid() {
        assert_eq!(parse(b"bytes=5-2", 10), Ranges::Ignore);
        // One invalid spec invalidates the whole header.
        assert_eq!(parse(b"bytes=0-1,5-2", 10), Ranges::Ignore);
        // Even when the valid one would be unsatisfiable.
        assert_eq!(parse(b"bytes=50-60,5-2", 10), Ranges::Ignore);
    }

    #[test]
    fn numbers_overflowing_u64_are_ignored() {
        assert_eq!(parse(b"bytes=18446744073709551616-", 10), Ranges::Ignore);
        assert_eq!(parse(b"bytes=0-18446744073709551616", 10), Ranges::Ignore);
        assert_eq!(parse(b"bytes=-18446744073709551616", 10), Ranges::Ignore);
        assert_eq!(
            parse(b"bytes=0-99999999999999999999999999999999", 10),
            Ranges::Ignore
        );
    }

    #[test]
    fn u64_max_is_still_a_number() {
        assert_eq!(parse(b"bytes=0-18446744073709551615", 10), sat(&[0..10]));
        assert_eq!(parse(b"bytes=-18446744073709551615", 10), sat(&[0..10]));
        assert_eq!(
            parse(b"bytes=18446744073709551615-", 10),
            Ranges::Unsatisfiable
        );
        assert_eq!(
            parse(b"bytes=18446744073709551614-", u64::MAX),
            sat(&[u64::MAX - 1..u64::MAX])
        );
    }

    #[test]
    fn leading_zeros_are_digits() {
        assert_eq!(parse(b"bytes=0001-0002", 10), sat(&[1..3]));
    }

    #[test]
    fn rfc9110_14_1_1_last_pos_is_clipped() {
        assert_eq!(parse(b"bytes=5-100", 10), sat(&[5..10]));
        assert_eq!(parse(b"bytes=9-9", 10), sat(&[9..10]));
        assert_eq!(parse(b"bytes=0-9", 10), sat(&[0..10]));
    }

    #[test]
    fn rfc9110_14_1_1_open_range_runs_to_the_end() {
        assert_eq!(parse(b"bytes=0-", 10), sat(&[0..10]));
        assert_eq!(parse(b"bytes=9-", 10), sat(&[9..10]));
    }

    #[test]
    fn rfc9110_14_1_1_suffix_longer_than_representation_selects_all() {
        assert_eq!(parse(b"bytes=-10", 10), sat(&[0..10]));
        assert_eq!(parse(b"bytes=-11", 10), sat(&[0..10]));
        assert_eq!(parse(b"bytes=-1", 10), sat(&[9..10]));
    }

    #[test]
    fn rfc9110_14_1_1_first_pos_at_or_past_the_end_is_unsatisfiable() {
        assert_eq!(parse(b"bytes=10-", 10), Ranges::Unsatisfiable);
        assert_eq!(parse(b"bytes=10-20", 10), Ranges::Unsatisfiable);
        assert_eq!(parse(b"bytes=100-200,10-", 10), Ranges::Unsatisfiable);
    }

    #[test]
    fn rfc9110_14_1_1_zero_suffix_is_unsatisfiable() {
        assert_eq!(parse(b"bytes=-0", 10), Ranges::Unsatisfiable);
        assert_eq!(parse(b"bytes=-000", 10), Ranges::Unsatisfiable);
    }

    #[test]
    fn unsatisfiable_ranges_are_dropped_when_others_remain() {
        assert_eq!(parse(b"bytes=20-30,0-1", 10), sat(&[0..2]));
        assert_eq!(parse(b"bytes=-0,2-3", 10), sat(&[2..4]));
    }

    #[test]
    fn zero_length_representation_is_never_satisfiable() {
        for v in [
            &b"bytes=0-"[..],
            b"bytes=0-0",
            b"bytes=-1",
            b"bytes=-0",
            b"bytes=0-10,-5",
        ] {
            assert_eq!(parse(v, 0), Ranges::Unsatisfiable, "{:?}", v.escape_ascii());
        }
        // Invalid stays invalid, whatever the length.
        assert_eq!(parse(b"bytes=5-2", 0), Ranges::Ignore);
    }

    #[test]
    fn rfc9110_5_6_1_2_ows_and_empty_list_elements() {
        assert_eq!(parse(b"bytes=0-1 , 4-5", 10), sat(&[0..2, 4..6]));
        assert_eq!(parse(b"bytes=0-1\t,\t4-5", 10), sat(&[0..2, 4..6]));
        assert_eq!(parse(b"bytes=,0-1,,4-5,", 10), sat(&[0..2, 4..6]));
        assert_eq!(parse(b"  bytes=0-1  ", 10), sat(&[0..2]));
    }

    #[test]
    fn order_of_request_is_kept_when_nothing_touches() {
        assert_eq!(parse(b"bytes=6-7,0-1,3-4", 10), sat(&[6..8, 0..2, 3..5]));
        assert_eq!(parse(b"bytes=-2,0-1", 10), sat(&[8..10, 0..2]));
    }

    #[test]
    fn overlapping_ranges_are_sorted_and_merged() {
        assert_eq!(parse(b"bytes=5-9,0-6", 10), sat(&[0..10]));
        assert_eq!(parse(b"bytes=8-9,0-1,1-2", 10), sat(&[0..3, 8..10]));
        assert_eq!(parse(b"bytes=0-9,2-3", 10), sat(&[0..10]));
        assert_eq!(parse(b"bytes=-5,0-", 10), sat(&[0..10]));
    }

    #[test]
    fn adjacent_ranges_are_merged() {
        assert_eq!(parse(b"bytes=0-1,2-3", 10), sat(&[0..4]));
        assert_eq!(parse(b"bytes=2-3,0-1", 10), sat(&[0..4]));
        assert_eq!(parse(b"bytes=0-1,2-3,4-5,8-9", 10), sat(&[0..6, 8..10]));
    }

    #[test]
    fn duplicate_ranges_are_merged() {
        assert_eq!(parse(b"bytes=0-4,0-4,0-4", 10), sat(&[0..5]));
    }

    #[test]
    fn cve_2011_3192_many_overlapping_ranges_cost_no_more_than_the_file() {
        // The "Apache Killer" pattern: "0-,5-0,5-1,5-2,..." repeated; here
        // 100 overlapping specs (the limit) must collapse to one range.
        let mut v = b"bytes=0-".to_vec();
        for i in 1..100 {
            v.extend_from_slice(format!(",5-{}", 5 + i).as_bytes());
        }
        assert_eq!(parse(&v, 1000), sat(&[0..1000]));
        let Ranges::Satisfiable(rs) = parse(b"bytes=0-,0-,-1000,1-", 1000) else {
            panic!("expected satisfiable");
        };
        let total: u64 = rs.iter().map(|r| r.end - r.start).sum();
        assert!(total <= 1000);
    }

    #[test]
    fn cve_2011_3192_more_than_100_ranges_are_ignored() {
        let specs = |n: usize| {
            let mut v = b"bytes=".to_vec();
            for i in 0..n {
                if i > 0 {
                    v.push(b',');
                }
                v.extend_from_slice(format!("{}-{}", i * 2, i * 2).as_bytes());
            }
            v
        };
        let Ranges::Satisfiable(rs) = parse(&specs(100), 1000) else {
            panic!("100 ranges should be honoured");
        };
        assert_eq!(rs.len(), 100);
        assert_eq!(parse(&specs(101), 1000), Ranges::Ignore);
        // Unsatisfiable specs count too.
        let mut v = specs(100);
        v.extend_from_slice(b",5000-");
        assert_eq!(parse(&v, 1000), Ranges::Ignore);
        // Empty list elements do not.
        let mut v = specs(100);
        v.extend_from_slice(b",,, ,");
        assert!(matches!(parse(&v, 1000), Ranges::Satisfiable(_)));
    }

    #[test]
    fn coalesced_ranges_never_exceed_the_representation() {
        let cases: &[&[u8]] = &[
            b"bytes=0-,0-,0-",
            b"bytes=-9,1-,3-4,0-0",
            b"bytes=9-9,0-0,5-5,1-8",
            b"bytes=4-6,2-8,0-3",
        ];
        for v in cases {
            let Ranges::Satisfiable(rs) = parse(v, 10) else {
                panic!("{:?}", v.escape_ascii());
            };
            let total: u64 = rs.iter().map(|r| r.end - r.start).sum();
            assert!(total <= 10, "{:?} -> {rs:?}", v.escape_ascii());
            assert!(rs.iter().all(|r| r.start < r.end && r.end <= 10));
        }
    }

    #[test]
    fn rfc9110_14_4_content_range_single_part() {
        assert_eq!(content_range(&(0..500), 10000), "bytes 0-499/10000");
        assert_eq!(
            content_range(&(9999..10000), 10000),
            "bytes 9999-9999/10000"
        );
        assert_eq!(
            content_range(&(0..u64::MAX), u64::MAX),
            "bytes 0-18446744073709551614/18446744073709551615"
        );
    }

    #[test]
    fn rfc9110_15_5_17_unsatisfied_range() {
        assert_eq!(unsatisfied_range(10000), "bytes */10000");
        assert_eq!(unsatisfied_range(0), "bytes */0");
    }

    #[test]
    fn rfc9110_14_6_multipart_byteranges_layout() {
        let plan = multipart(&[0..2, 8..10], 10, "text/plain", "XYZ");
        assert_eq!(plan.parts.len(), 2);
        assert_eq!(
            plan.parts[0].0,
            b"\r\n--XYZ\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/10\r\n\r\n"
        );
        assert_eq!(plan.parts[0].1, 0..2);
        assert_eq!(
            plan.parts[1].0,
            b"\r\n--XYZ\r\nContent-Type: text/plain\r\nContent-Range: bytes 8-9/10\r\n\r\n"
        );
        assert_eq!(plan.parts[1].1, 8..10);
        assert_eq!(plan.trailer, b"\r\n--XYZ--\r\n");

        // Assemble the body and check content_length against it.
        let content = b"0123456789";
        let mut body = Vec::new();
        for (head, r) in &plan.parts {
            body.extend_from_slice(head);
            body.extend_from_slice(&content[r.start as usize..r.end as usize]);
        }
        body.extend_from_slice(&plan.trailer);
        assert_eq!(plan.content_length, body.len() as u64);
        assert_eq!(
            body,
            b"\r\n--XYZ\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/10\r\n\r\n01\
              \r\n--XYZ\r\nContent-Type: text/plain\r\nContent-Range: bytes 8-9/10\r\n\r\n89\
              \r\n--XYZ--\r\n"
        );
    }

    #[test]
    fn rfc9110_14_6_multipart_without_content_type() {
        let plan = multipart(&[0..1, 5..6], 10, "", "b");
        assert_eq!(
            plan.parts[0].0,
            b"\r\n--b\r\nContent-Range: bytes 0-0/10\r\n\r\n"
        );
        let heads: u64 = plan.parts.iter().map(|(h, _)| h.len() as u64).sum();
        assert_eq!(plan.content_length, heads + 2 + plan.trailer.len() as u64);
    }

    #[test]
    fn multipart_of_nothing_is_just_the_trailer() {
        let plan = multipart(&[], 10, "text/plain", "b");
        assert!(plan.parts.is_empty());
        assert_eq!(plan.content_length, plan.trailer.len() as u64);
    }

    #[test]
    fn multipart_content_type_names_the_boundary() {
        assert_eq!(
            multipart_content_type("3d6b6a416f9b5"),
            "multipart/byteranges; boundary=3d6b6a416f9b5"
        );
    }
}
