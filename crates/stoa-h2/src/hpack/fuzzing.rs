//! The properties the `hpack` fuzz target checks (see [`fuzz_check`]).
//! Not API.

use std::collections::VecDeque;

use super::table::{ENTRY_OVERHEAD, STATIC};
use super::{copy_out, huffman, DecodeError, Decoder, Encoder, Str};

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Input layout: byte 0 picks the table limit (bits 0-1: 0, 64, 256 or
/// 4096) and the list limit (bits 2-3: none, 64, 512 or 16384); byte 1
/// (modulo the rest's length + 1) where the rest splits into two header
/// blocks decoded one after the other on one connection. Panics when a
/// property breaks:
///
/// - `Decoder` gives the same fields, the same result and the same
///   dynamic table after each block as a plain reference decoder written
///   straight from RFC 7541 (bit-by-bit Huffman, a `VecDeque` of owned
///   entries); the table never exceeds its limit;
/// - what reaches the callback never exceeds the list limit;
/// - decoded fields, encoded again with `Encoder`, decode to the same;
/// - the rest, Huffman-encoded, decodes back to itself.
pub fn fuzz_check(data: &[u8]) {
    let (sel, cut, rest) = match data {
        [a, b, rest @ ..] => (*a, usize::from(*b), rest),
        _ => return,
    };
    let limit = [0, 64, 256, 4096][usize::from(sel & 3)];
    let max_list = [usize::MAX, 64, 512, 16384][usize::from((sel >> 2) & 3)];
    let cut = cut % (rest.len() + 1);
    let mut dec = Decoder::new(limit);
    let mut reference = Reference::new(limit);
    for block in [&rest[..cut], &rest[cut..]] {
        let mut fields = Vec::new();
        let mut delivered = 0usize;
        let r = dec.decode(block, max_list, &mut |n, v| {
            delivered += n.len() + v.len() + ENTRY_OVERHEAD;
            fields.push((n.to_vec(), v.to_vec()));
        });
        let (want_fields, want_r) = reference.decode(block, max_list);
        assert_eq!(r, want_r, "result differs from the reference");
        assert_eq!(fields, want_fields, "fields differ from the reference");
        assert!(
            delivered <= max_list,
            "{delivered} octets past the limit {max_list}"
        );
        assert!(dec.table.size() <= limit, "table size past its limit");
        assert_eq!(table(&dec), reference.entries(), "tables differ");
        match r {
            Ok(()) => round_trip(&fields),
            Err(DecodeError::ListTooLarge) => {}
            Err(_) => break,
        }
    }
    let mut enc = Vec::new();
    huffman::encode(rest, &mut enc);
    assert_eq!(enc.len(), huffman::encoded_len(rest));
    let mut back = Vec::new();
    assert_eq!(huffman::decode(&enc, &mut back), Ok(()));
    assert_eq!(back, rest, "Huffman round trip");
}

fn round_trip(fields: &Fields) {
    let mut block = Vec::new();
    for (n, v) in fields {
        Encoder::field(&mut block, n, v);
    }
    let mut again = Vec::new();
    let r = Decoder::new(4096).decode(&block, usize::MAX, &mut |n, v| {
        again.push((n.to_vec(), v.to_vec()));
    });
    assert_eq!(r, Ok(()), "re-encoded block does not decode");
    assert_eq!(&again, fields, "re-encoded block decodes differently");
}

/// The decoder's dynamic table, newest first.
fn table(d: &Decoder) -> Fields {
    let mut out = Vec::new();
    for i in 0..d.table.len() {
        let Ok((name, value)) = d.indexed(STATIC.len() + 1 + i) else {
            panic!("entry {i} of {} not indexable", d.table.len());
        };
        let bytes = |s: Str| {
            let mut scratch = Vec::new();
            match s {
                Str::Table(off, len) => copy_out(&d.table, &mut scratch, off, len),
                _ => panic!("a dynamic entry outside the table"),
            };
            scratch
        };
        out.push((bytes(name), bytes(value)));
    }
    out
}

/// RFC 7541 read as plainly as possible, to compare against.
struct Reference {
    entries: VecDeque<(Vec<u8>, Vec<u8>)>,
    max: usize,
    limit: usize,
}

impl Reference {
    fn new(limit: usize) -> Reference {
        Reference {
            entries: VecDeque::new(),
            max: limit,
            limit,
        }
    }

    fn entries(&self) -> Fields {
        self.entries.iter().cloned().collect()
    }

    fn size(&self) -> usize {
        self.entries
            .iter()
            .map(|(n, v)| n.len() + v.len() + 32)
            .sum()
    }

    fn get(&self, idx: usize) -> Result<(Vec<u8>, Vec<u8>), DecodeError> {
        if idx == 0 {
            Err(DecodeError::BadIndex)
        } else if idx <= 61 {
            let (n, v) = STATIC[idx - 1];
            Ok((n.to_vec(), v.to_vec()))
        } else {
            self.entries
                .get(idx - 62)
                .cloned()
                .ok_or(DecodeError::BadIndex)
        }
    }

    fn decode(&mut self, block: &[u8], max_list: usize) -> (Fields, Result<(), DecodeError>) {
        let mut out = Vec::new();
        let mut total = 0usize;
        let mut r = Reader { block, pos: 0 };
        let mut seen_field = false;
        while r.pos < block.len() {
            let b = block[r.pos];
            let step = (|| {
                let (field, add) = if b >= 0x80 {
                    (self.get(r.int(7)?)?, false)
                } else if b >= 0x40 {
                    let idx = r.int(6)?;
                    let name = if idx == 0 {
                        r.string()?
                    } else {
                        self.get(idx)?.0
                    };
                    ((name, r.string()?), true)
                } else if b >= 0x20 {
                    let size = r.int(5)?;
                    if seen_field || size > self.limit {
                        return Err(DecodeError::BadSizeUpdate);
                    }
                    self.max = size;
                    while self.size() > self.max {
                        self.entries.pop_back();
                    }
                    return Ok(None);
                } else {
                    let idx = r.int(4)?;
                    let name = if idx == 0 {
                        r.string()?
                    } else {
                        self.get(idx)?.0
                    };
                    ((name, r.string()?), false)
                };
                Ok(Some((field, add)))
            })();
            let ((name, value), add) = match step {
                Err(e) => return (out, Err(e)),
                Ok(None) => continue,
                Ok(Some(f)) => f,
            };
            seen_field = true;
            total = total.saturating_add(name.len() + value.len() + 32);
            if total <= max_list {
                out.push((name.clone(), value.clone()));
            }
            if add {
                let size = name.len() + value.len() + 32;
                if size > self.max {
                    self.entries.clear();
                } else {
                    while self.size() + size > self.max {
                        self.entries.pop_back();
                    }
                    self.entries.push_front((name, value));
                }
            }
        }
        let r = if total > max_list {
            Err(DecodeError::ListTooLarge)
        } else {
            Ok(())
        };
        (out, r)
    }
}

struct Reader<'a> {
    block: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.block.get(self.pos).ok_or(DecodeError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    /// §5.1; at most five continuation bytes, the value within 32 bits.
    fn int(&mut self, prefix: u32) -> Result<usize, DecodeError> {
        let max = (1u64 << prefix) - 1;
        let mut v = u64::from(self.byte()?) & max;
        if v < max {
            return Ok(v as usize);
        }
        for i in 0..5 {
            let b = self.byte()?;
            v += u64::from(b & 0x7f) << (7 * i);
            if v > u64::from(u32::MAX) {
                return Err(DecodeError::IntegerOverflow);
            }
            if b & 0x80 == 0 {
                return Ok(v as usize);
            }
        }
        Err(DecodeError::IntegerOverflow)
    }

    /// §5.2, Huffman decoded bit by bit against the code table.
    fn string(&mut self) -> Result<Vec<u8>, DecodeError> {
        let huff = self.block.get(self.pos).is_some_and(|b| b & 0x80 != 0);
        let len = self.int(7)?;
        let end = self.pos.checked_add(len).ok_or(DecodeError::Truncated)?;
        let bytes = self
            .block
            .get(self.pos..end)
            .ok_or(DecodeError::Truncated)?;
        self.pos = end;
        if !huff {
            return Ok(bytes.to_vec());
        }
        let mut out = Vec::new();
        let (mut code, mut len) = (0u32, 0u8);
        for bit in bytes
            .iter()
            .flat_map(|b| (0..8).rev().map(move |i| (b >> i) & 1))
        {
            code = (code << 1) | u32::from(bit);
            len += 1;
            if let Some(sym) = huffman::CODES.iter().position(|&c| c == (code, len)) {
                if sym == 256 {
                    return Err(DecodeError::BadHuffman);
                }
                out.push(sym as u8);
                (code, len) = (0, 0);
            } else if len >= 30 {
                unreachable!("the code is complete: 30 bits always end a symbol");
            }
        }
        if len >= 8 || code != (1 << len) - 1 {
            return Err(DecodeError::BadHuffman);
        }
        Ok(out)
    }
}
