//! Just enough DER (X.690) to read what OCSP stapling needs from
//! certificates and OCSP responses, and to write an OCSP request: a TLV
//! reader over byte slices, never copying, failing with `None` on
//! anything malformed (these bytes come from files and the network).

/// One DER element: its tag byte, its contents, and the whole encoding
/// (tag and length included: what a signature covers).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tlv<'a> {
    pub tag: u8,
    pub content: &'a [u8],
    pub whole: &'a [u8],
}

pub(crate) const SEQUENCE: u8 = 0x30;
pub(crate) const INTEGER: u8 = 0x02;
pub(crate) const BIT_STRING: u8 = 0x03;
pub(crate) const OCTET_STRING: u8 = 0x04;
pub(crate) const OID: u8 = 0x06;
pub(crate) const ENUMERATED: u8 = 0x0a;
pub(crate) const GENERALIZED_TIME: u8 = 0x18;
pub(crate) const UTC_TIME: u8 = 0x17;

/// Context-specific tag `[n]`, constructed (EXPLICIT, or IMPLICIT of a
/// constructed type).
pub(crate) const fn ctx(n: u8) -> u8 {
    0xa0 | n
}

/// Context-specific tag `[n]`, primitive (IMPLICIT of a primitive type).
pub(crate) const fn ctx_prim(n: u8) -> u8 {
    0x80 | n
}

/// Reads elements one after the other.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next element, whatever its tag.
    pub(crate) fn any(&mut self) -> Option<Tlv<'a>> {
        let input = self.rest;
        let (&tag, after_tag) = input.split_first()?;
        // High tag numbers (0x1f) do not occur in what is read here.
        if tag & 0x1f == 0x1f {
            return None;
        }
        let (&first, mut after_len) = after_tag.split_first()?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || after_len.len() < n {
                return None;
            }
            let mut len = 0usize;
            for &b in &after_len[..n] {
                len = (len << 8) | usize::from(b);
            }
            after_len = &after_len[n..];
            len
        };
        if after_len.len() < len {
            return None;
        }
        let header = input.len() - after_len.len();
        let whole = &input[..header + len];
        self.rest = &input[header + len..];
        Some(Tlv {
            tag,
            content: &after_len[..len],
            whole,
        })
    }

    /// The next element, which must have `tag`.
    pub(crate) fn tagged(&mut self, tag: u8) -> Option<Tlv<'a>> {
        let t = self.any()?;
        (t.tag == tag).then_some(t)
    }

    /// The next element if it has `tag`; otherwise nothing is consumed.
    pub(crate) fn optional(&mut self, tag: u8) -> Option<Tlv<'a>> {
        if self.rest.first() == Some(&tag) {
            self.any()
        } else {
            None
        }
    }
}

impl<'a> Tlv<'a> {
    /// A reader over this element's contents.
    pub(crate) fn reader(&self) -> Reader<'a> {
        Reader::new(self.content)
    }

    /// A BIT STRING's bits, whole bytes only (keys and signatures).
    pub(crate) fn bits(&self) -> Option<&'a [u8]> {
        match self.content.split_first() {
            Some((0, bits)) if self.tag == BIT_STRING => Some(bits),
            _ => None,
        }
    }
}

/// Encodes one element.
pub(crate) fn encode(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    out.push(tag);
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = (len as u32).to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (4 - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

/// Seconds since the epoch of a GeneralizedTime ("YYYYMMDDHHMMSSZ", with
/// optional fractions, as RFC 5280 §4.1.2.5.2 and RFC 6960 use it) or a
/// UTCTime ("YYMMDDHHMMSSZ").
pub(crate) fn time(t: &Tlv<'_>) -> Option<i64> {
    let s = std::str::from_utf8(t.content).ok()?;
    let s = s.strip_suffix('Z')?;
    let (year, rest) = match t.tag {
        GENERALIZED_TIME => (s.get(..4)?.parse::<i64>().ok()?, s.get(4..)?),
        UTC_TIME => {
            let yy = s.get(..2)?.parse::<i64>().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, s.get(2..)?)
        }
        _ => return None,
    };
    // Fractions of a second are dropped.
    let rest = rest.split('.').next()?;
    if rest.len() != 10 || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = |i: usize| rest.get(i..i + 2).and_then(|d| d.parse::<i64>().ok());
    let (month, day, h, m, sec) = (n(0)?, n(2)?, n(4)?, n(6)?, n(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86400 + h * 3600 + m * 60 + sec)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_in_short_and_long_form_round_trip_and_truncation_is_refused_x690_8_1_3() {
        for len in [0usize, 5, 127, 128, 255, 256, 70000] {
            let content = vec![7u8; len];
            let enc = encode(OCTET_STRING, &content);
            let mut r = Reader::new(&enc);
            let t = r.tagged(OCTET_STRING).expect("decodes");
            assert_eq!(t.content.len(), len);
            assert_eq!(t.whole, &enc[..]);
            assert!(r.is_empty());
            assert!(Reader::new(&enc[..enc.len() - 1]).any().is_none() || len == 0);
        }
        assert!(Reader::new(&[0x30, 0x85, 1, 0, 0, 0, 0]).any().is_none());
    }

    #[test]
    fn generalized_and_utc_times_are_seconds_since_the_epoch_rfc5280_4_1_2_5() {
        let g = |s: &str| {
            time(&Tlv {
                tag: GENERALIZED_TIME,
                content: s.as_bytes(),
                whole: &[],
            })
        };
        assert_eq!(g("19700101000000Z"), Some(0));
        assert_eq!(g("20261127041500Z"), Some(1_795_752_900));
        assert_eq!(g("20261127041500.123Z"), Some(1_795_752_900));
        assert_eq!(g("20261127041500"), None);
        assert_eq!(g("20261327041500Z"), None);
        let u = time(&Tlv {
            tag: UTC_TIME,
            content: b"261127041500Z",
            whole: &[],
        });
        assert_eq!(u, Some(1_795_752_900));
    }
}
