//! Name-value pairs (§3.4).
//!
//! Each length is one byte when below 128, else four bytes big-endian with
//! the high bit of the first set (so at most 2^31 - 1). The name length,
//! then the value length, then the name bytes, then the value bytes.
//!
//! FCGI_GET_VALUES and its result hold pairs in one record; FCGI_PARAMS is a
//! stream, and a pair may be split anywhere across its records: the
//! [`PairDecoder`] takes the stream in pieces.

use crate::record::{self, RecordType};
use crate::Error;

/// The longest name or value (§3.4: 31-bit lengths).
pub const MAX_LEN: usize = 0x7fff_ffff;

fn len_size(n: usize) -> usize {
    if n < 0x80 {
        1
    } else {
        4
    }
}

/// Bytes the pair takes encoded.
pub fn encoded_len(name: &[u8], value: &[u8]) -> usize {
    len_size(name.len()) + len_size(value.len()) + name.len() + value.len()
}

fn push_len(out: &mut Vec<u8>, n: usize) {
    if n < 0x80 {
        out.push(n as u8);
    } else {
        out.extend_from_slice(&(n as u32 | 0x8000_0000).to_be_bytes());
    }
}

/// Appends one pair. `PairTooLong` (and nothing written) past 2^31 - 1
/// bytes of name or value.
pub fn push_pair(out: &mut Vec<u8>, name: &[u8], value: &[u8]) -> Result<(), Error> {
    if name.len() > MAX_LEN || value.len() > MAX_LEN {
        return Err(Error::PairTooLong);
    }
    out.reserve(encoded_len(name, value));
    push_len(out, name.len());
    push_len(out, value.len());
    out.extend_from_slice(name);
    out.extend_from_slice(value);
    Ok(())
}

/// Appends `pairs` as the FCGI_PARAMS stream of request `request_id`,
/// including the empty record that ends it (§5.2). On error nothing is
/// written.
pub fn push_params<N: AsRef<[u8]>, V: AsRef<[u8]>>(
    out: &mut Vec<u8>,
    request_id: u16,
    pairs: impl IntoIterator<Item = (N, V)>,
) -> Result<(), Error> {
    let mut content = Vec::new();
    for (n, v) in pairs {
        push_pair(&mut content, n.as_ref(), v.as_ref())?;
    }
    record::push_stream(out, RecordType::Params, request_id, &content);
    record::push_stream_end(out, RecordType::Params, request_id);
    Ok(())
}

/// One length from the front of `buf`: (length, bytes it took), or `None`
/// if `buf` ends inside it.
fn read_len(buf: &[u8]) -> Option<(usize, usize)> {
    let b0 = *buf.first()?;
    if b0 & 0x80 == 0 {
        return Some((usize::from(b0), 1));
    }
    let b = buf.get(..4)?;
    let n = u32::from_be_bytes([b0 & 0x7f, b[1], b[2], b[3]]);
    Some((n as usize, 4))
}

/// The encoded length of the pair at the front of `buf`, once both of its
/// lengths are there.
fn pair_size(buf: &[u8]) -> Option<u64> {
    let (nl, a) = read_len(buf)?;
    let (vl, b) = read_len(buf.get(a..)?)?;
    Some((a + b) as u64 + nl as u64 + vl as u64)
}

/// Parses the pair at the front of `buf`: (name, value, bytes used), or
/// `None` when `buf` holds only part of it.
pub fn parse_pair(buf: &[u8]) -> Option<(&[u8], &[u8], usize)> {
    let (nl, a) = read_len(buf)?;
    let (vl, b) = read_len(buf.get(a..)?)?;
    let start = a + b;
    let name_end = start.checked_add(nl)?;
    let end = name_end.checked_add(vl)?;
    let name = buf.get(start..name_end)?;
    let value = buf.get(name_end..end)?;
    Some((name, value, end))
}

/// The pairs of a complete buffer (one record's content): an error, once,
/// if the last pair runs past the end.
pub fn pairs(buf: &[u8]) -> Pairs<'_> {
    Pairs { buf, failed: false }
}

/// Iterator returned by [`pairs`].
#[derive(Debug, Clone)]
pub struct Pairs<'a> {
    buf: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for Pairs<'a> {
    type Item = Result<Pair<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() || self.failed {
            return None;
        }
        match parse_pair(self.buf) {
            Some((name, value, used)) => {
                self.buf = &self.buf[used..];
                Some(Ok((name, value)))
            }
            None => {
                self.failed = true;
                Some(Err(Error::BadPairs))
            }
        }
    }
}

/// A name and its value, borrowed.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// Collects the pairs of a complete buffer.
pub fn parse_pairs(buf: &[u8]) -> Result<Vec<Pair<'_>>, Error> {
    pairs(buf).collect()
}

/// Decodes a stream of pairs (FCGI_PARAMS) given in pieces split anywhere,
/// with a limit on the stream's total size. Holds at most the unfinished
/// pair.
#[derive(Debug, Clone)]
pub struct PairDecoder {
    /// The start of a pair not yet complete.
    partial: Vec<u8>,
    /// Bytes of the stream fed so far.
    fed: usize,
    /// Bytes of the stream in complete pairs.
    consumed: usize,
    limit: usize,
}

impl PairDecoder {
    /// A decoder refusing streams longer than `limit` bytes.
    pub fn new(limit: usize) -> PairDecoder {
        PairDecoder {
            partial: Vec::new(),
            fed: 0,
            consumed: 0,
            limit,
        }
    }

    /// Feeds the next piece of the stream, calling `on_pair` for each pair
    /// completed. `TooLarge` when the stream, or a pair announced in it,
    /// goes past the limit.
    pub fn feed(
        &mut self,
        mut chunk: &[u8],
        mut on_pair: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Error> {
        self.fed = self.fed.saturating_add(chunk.len());
        if self.fed > self.limit {
            return Err(Error::TooLarge);
        }
        // Finish the pair begun in an earlier piece.
        while !self.partial.is_empty() {
            match pair_size(&self.partial) {
                Some(total) => {
                    self.check_pair(total)?;
                    let need = total as usize - self.partial.len();
                    let take = need.min(chunk.len());
                    self.partial.extend_from_slice(&chunk[..take]);
                    chunk = &chunk[take..];
                    if take < need {
                        return Ok(());
                    }
                    if let Some((name, value, used)) = parse_pair(&self.partial) {
                        on_pair(name, value);
                        self.consumed += used;
                    }
                    self.partial.clear();
                }
                None => {
                    // The lengths themselves are split: one byte at a time
                    // (at most 8), so no byte of the next pair is taken.
                    let Some((&b, rest)) = chunk.split_first() else {
                        return Ok(());
                    };
                    self.partial.push(b);
                    chunk = rest;
                }
            }
        }
        while let Some((name, value, used)) = parse_pair(chunk) {
            on_pair(name, value);
            self.consumed += used;
            chunk = &chunk[used..];
        }
        if let Some(total) = pair_size(chunk) {
            self.check_pair(total)?;
        }
        self.partial.extend_from_slice(chunk);
        Ok(())
    }

    /// Refuses a pair that would end past the limit before buffering it.
    fn check_pair(&self, total: u64) -> Result<(), Error> {
        if self.consumed as u64 + total > self.limit as u64 {
            Err(Error::TooLarge)
        } else {
            Ok(())
        }
    }

    /// The end of the stream: `BadPairs` if it ends inside a pair.
    pub fn finish(&self) -> Result<(), Error> {
        if self.partial.is_empty() {
            Ok(())
        } else {
            Err(Error::BadPairs)
        }
    }

    /// Bytes held for an unfinished pair.
    pub fn buffered(&self) -> usize {
        self.partial.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Owned = Vec<(Vec<u8>, Vec<u8>)>;

    fn stream(pieces: &[&[u8]], limit: usize) -> Result<Owned, Error> {
        let mut d = PairDecoder::new(limit);
        let mut got = Vec::new();
        for p in pieces {
            d.feed(p, |n, v| got.push((n.to_vec(), v.to_vec())))?;
        }
        d.finish()?;
        Ok(got)
    }

    #[test]
    fn short_lengths_take_one_byte_and_long_ones_four_with_the_high_bit_spec_3_4() {
        let mut out = Vec::new();
        push_pair(&mut out, b"NAME", b"v").unwrap();
        assert_eq!(out, b"\x04\x01NAMEv");
        out.clear();
        let long = vec![b'a'; 127];
        push_pair(&mut out, b"N", &long).unwrap();
        assert_eq!(&out[..2], b"\x01\x7f");
        out.clear();
        let long = vec![b'a'; 128];
        push_pair(&mut out, &long, b"").unwrap();
        assert_eq!(&out[..5], [0x80, 0, 0, 0x80, 0]);
        assert_eq!(out.len(), encoded_len(&long, b""));
        assert_eq!(parse_pair(&out), Some((&long[..], &b""[..], out.len())));
        let long = vec![b'b'; 0x1_0203];
        out.clear();
        push_pair(&mut out, b"K", &long).unwrap();
        assert_eq!(&out[..5], [1, 0x80, 1, 2, 3]);
        assert_eq!(parse_pair(&out).map(|p| p.1.len()), Some(0x1_0203));
    }

    #[test]
    fn a_four_byte_length_with_the_high_bit_is_read_without_it_spec_3_4() {
        // Length 3 spelled in four bytes: legal, if unusual.
        let wire = b"\x80\x00\x00\x03\x01abcv";
        assert_eq!(parse_pair(wire), Some((&b"abc"[..], &b"v"[..], 9)));
    }

    #[test]
    fn a_pair_longer_than_its_record_is_malformed_spec_3_4() {
        assert_eq!(parse_pairs(b"\x04\x05NAMEv"), Err(Error::BadPairs));
        assert_eq!(
            parse_pairs(b"\x01\x01ab\xff\xff\xff\xff\x00"),
            Err(Error::BadPairs)
        );
        assert_eq!(parse_pairs(b"\x80\x00"), Err(Error::BadPairs));
        assert_eq!(
            parse_pairs(b"\x01\x01ab\x00\x00"),
            Ok(vec![(&b"a"[..], &b"b"[..]), (&b""[..], &b""[..])])
        );
    }

    #[test]
    fn pairs_split_at_every_byte_across_params_records_decode_the_same_spec_5_2() {
        let mut wire = Vec::new();
        let big = vec![b'x'; 300];
        for (n, v) in [
            (&b"SCRIPT_NAME"[..], &b"/index.php"[..]),
            (b"EMPTY", b""),
            (&big[..], b"big name"),
            (b"BIG_VALUE", &big[..]),
            (b"Q", b"a=1"),
        ] {
            push_pair(&mut wire, n, v).unwrap();
        }
        let whole = stream(&[&wire], 1 << 20).unwrap();
        assert_eq!(whole.len(), 5);
        assert_eq!(whole[3].1.len(), 300);
        for a in 0..=wire.len() {
            assert_eq!(
                stream(&[&wire[..a], &wire[a..]], 1 << 20).unwrap(),
                whole,
                "{a}"
            );
        }
        for a in (0..wire.len()).step_by(7) {
            for b in a..wire.len() {
                assert_eq!(
                    stream(&[&wire[..a], &wire[a..b], &wire[b..]], 1 << 20).unwrap(),
                    whole
                );
            }
        }
        let bytes: Vec<&[u8]> = wire.chunks(1).collect();
        assert_eq!(stream(&bytes, 1 << 20).unwrap(), whole);
    }

    #[test]
    fn a_stream_ending_inside_a_pair_is_malformed() {
        assert_eq!(stream(&[b"\x04\x01NAM"], 100), Err(Error::BadPairs));
        assert_eq!(stream(&[b"\x80\x00"], 100), Err(Error::BadPairs));
    }

    #[test]
    fn params_over_the_limit_are_refused_before_they_are_buffered() {
        let mut wire = Vec::new();
        push_pair(&mut wire, b"A", &[b'v'; 100]).unwrap();
        assert_eq!(stream(&[&wire], wire.len()).map(|p| p.len()), Ok(1));
        assert_eq!(stream(&[&wire], wire.len() - 1), Err(Error::TooLarge));
        // A pair announcing 2 GB is refused from its lengths alone.
        let mut d = PairDecoder::new(1 << 20);
        assert_eq!(
            d.feed(b"\x01\xff\xff\xff\xffA", |_, _| {}),
            Err(Error::TooLarge)
        );
        let mut d = PairDecoder::new(1 << 20);
        assert_eq!(d.feed(b"\x01", |_, _| {}), Ok(()));
        assert_eq!(d.feed(b"\xff\xff\xff\xff", |_, _| {}), Err(Error::TooLarge));
        assert!(d.buffered() <= 8);
    }

    #[test]
    fn push_params_ends_the_stream_with_an_empty_record_spec_5_2() {
        let mut out = Vec::new();
        push_params(&mut out, 1, [("A", "b")]).unwrap();
        assert_eq!(
            out,
            [
                1, 4, 0, 1, 0, 4, 4, 0, 1, 1, b'A', b'b', 0, 0, 0, 0, // pair
                1, 4, 0, 1, 0, 0, 0, 0, // end of stream
            ]
        );
    }
}
