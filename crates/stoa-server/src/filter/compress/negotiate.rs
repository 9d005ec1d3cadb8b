//! Content-coding negotiation: which coding, if any, a response gets for
//! a request's `Accept-Encoding` (RFC 9110 §12.5.3) among those the
//! server offers, in the server's order of preference.

use super::Coding;

/// A quality value in thousandths (RFC 9110 §12.4.2: at most three
/// decimals), 0 to 1000.
type Q = u16;

/// The coding to use, or None for the identity: the offered coding with
/// the highest q above 0, the server's order breaking ties; `*` stands
/// for every coding the field does not name; an explicit `identity`
/// preferred over every acceptable coding wins. An empty field, or one
/// that names no offered coding, means the identity.
pub(crate) fn choose(accept_encoding: &[u8], offer: &[Coding]) -> Option<Coding> {
    let mut star: Option<Q> = None;
    let mut identity: Option<Q> = None;
    // At most one q per offered coding (the first item naming it counts).
    let mut named: [Option<Q>; Coding::COUNT] = [None; Coding::COUNT];
    for item in stoa_h1::list_items(accept_encoding) {
        let mut parts = item.split(|&b| b == b';');
        let coding = stoa_h1::trim(parts.next().unwrap_or(b""));
        let mut q = 1000;
        for p in parts {
            let p = stoa_h1::trim(p);
            if let Some(v) = p.strip_prefix(b"q=").or_else(|| p.strip_prefix(b"Q=")) {
                match parse_q(v) {
                    Some(v) => q = v,
                    // A malformed weight: the item is not understood.
                    None => q = 0,
                }
            }
        }
        if coding == b"*" {
            star.get_or_insert(q);
        } else if coding.eq_ignore_ascii_case(b"identity") {
            identity.get_or_insert(q);
        } else if let Some(c) = Coding::from_token(coding) {
            named[c as usize].get_or_insert(q);
        }
    }
    let mut best: Option<(Coding, Q)> = None;
    for &c in offer {
        let q = named[c as usize].or(star).unwrap_or(0);
        if q > 0 && best.is_none_or(|(_, bq)| q > bq) {
            best = Some((c, q));
        }
    }
    let (c, q) = best?;
    match identity {
        Some(iq) if iq > q => None,
        _ => Some(c),
    }
}

/// `0`, `0.5`, `1.000` ... (RFC 9110 §12.4.2 `qvalue`).
fn parse_q(v: &[u8]) -> Option<Q> {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(i) => (&v[..i], &v[i + 1..]),
        None => (v, &[][..]),
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths: Q = 0;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| Q::from(d - b'0'));
    }
    match int {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Coding::{Br, Gzip, Zstd};

    const ALL: &[Coding] = &[Zstd, Br, Gzip];

    #[test]
    fn equal_weights_go_to_the_servers_preference() {
        // What browsers send: every coding at q=1 (RFC 9110 §12.5.3).
        assert_eq!(choose(b"gzip, deflate, br, zstd", ALL), Some(Zstd));
        assert_eq!(choose(b"gzip, deflate, br", ALL), Some(Br));
        assert_eq!(choose(b"gzip, deflate, br", &[Gzip, Br]), Some(Gzip));
    }

    #[test]
    fn the_highest_q_value_wins_over_the_servers_preference() {
        assert_eq!(choose(b"zstd;q=0.5, gzip;q=0.8", ALL), Some(Gzip));
        assert_eq!(choose(b"br;q=0.999, gzip", ALL), Some(Gzip));
        assert_eq!(choose(b"br ; Q=1.000 , zstd;q=0.9", ALL), Some(Br));
    }

    #[test]
    fn a_coding_with_q_zero_is_refused() {
        assert_eq!(choose(b"gzip;q=0", ALL), None);
        assert_eq!(choose(b"gzip;q=0.000, br;q=0.001", ALL), Some(Br));
    }

    #[test]
    fn the_star_stands_for_codings_the_field_does_not_name() {
        assert_eq!(choose(b"*", ALL), Some(Zstd));
        assert_eq!(choose(b"zstd;q=0, *", ALL), Some(Br));
        assert_eq!(choose(b"*;q=0, gzip", ALL), Some(Gzip));
        assert_eq!(choose(b"*;q=0", ALL), None);
    }

    #[test]
    fn identity_preferred_over_every_coding_means_no_coding() {
        assert_eq!(choose(b"gzip;q=0.5, identity", ALL), None);
        // `identity;q=0` refuses the identity: any acceptable coding then.
        assert_eq!(choose(b"gzip, identity;q=0", ALL), Some(Gzip));
        assert_eq!(choose(b"identity", ALL), None);
    }

    #[test]
    fn an_empty_or_unknown_field_means_the_identity() {
        assert_eq!(choose(b"", ALL), None);
        assert_eq!(choose(b"compress, deflate", ALL), None);
    }

    #[test]
    fn x_gzip_is_gzip_and_names_are_case_insensitive() {
        // RFC 9110 §8.4.1.3: a recipient SHOULD consider x-gzip gzip.
        assert_eq!(choose(b"x-gzip", ALL), Some(Gzip));
        assert_eq!(choose(b"GZIP, BR", &[Gzip, Br]), Some(Gzip));
    }

    #[test]
    fn a_malformed_q_value_makes_its_item_unacceptable() {
        assert_eq!(choose(b"gzip;q=2", ALL), None);
        assert_eq!(choose(b"gzip;q=0.5555, br;q=abc", ALL), None);
        assert_eq!(choose(b"gzip;q=1.5, br;q=.5", ALL), None);
    }

    #[test]
    fn only_offered_codings_are_chosen() {
        assert_eq!(choose(b"zstd, br", &[Gzip]), None);
        assert_eq!(choose(b"zstd, br, gzip;q=0.1", &[Gzip]), Some(Gzip));
    }
}
