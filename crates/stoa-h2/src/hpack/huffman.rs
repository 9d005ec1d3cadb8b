//! The Huffman code of RFC 7541 §5.2 (Appendix B).
//!
//! Decoding reads the input through a 64-bit bit buffer and looks the next
//! `PEEK` bits up in one table built at compile time, which gives the one
//! or two symbols whose codes fit in them: lowercase letters, digits and
//! the usual punctuation come two per lookup, every code up to `PEEK` bits
//! (all printable ASCII but a few marks) at least one, with no per-nibble
//! state machine. The code is canonical (codes of one length are
//! consecutive numbers, shorter codes numerically first), so the rare
//! longer codes are found by comparing the next `len` bits against the
//! range of each longer length.

use std::mem::MaybeUninit;

use super::DecodeError;

/// Bits looked up at once: 2^11 entries of 4 bytes (8 KiB), covering every
/// code up to 11 bits (letters, digits and the usual punctuation of paths,
/// cookies and base64).
const PEEK: u32 = 11;

/// The end-of-string symbol, whose appearance in a string is an error
/// (RFC 7541 §5.2).
const EOS: u16 = 256;

/// (code, bit length) of every symbol, EOS (256) last: RFC 7541 Appendix B.
pub(super) const CODES: [(u32, u8); 257] = [
    (0x1ff8, 13),
    (0x7fffd8, 23),
    (0xfffffe2, 28),
    (0xfffffe3, 28),
    (0xfffffe4, 28),
    (0xfffffe5, 28),
    (0xfffffe6, 28),
    (0xfffffe7, 28),
    (0xfffffe8, 28),
    (0xffffea, 24),
    (0x3ffffffc, 30),
    (0xfffffe9, 28),
    (0xfffffea, 28),
    (0x3ffffffd, 30),
    (0xfffffeb, 28),
    (0xfffffec, 28),
    (0xfffffed, 28),
    (0xfffffee, 28),
    (0xfffffef, 28),
    (0xffffff0, 28),
    (0xffffff1, 28),
    (0xffffff2, 28),
    (0x3ffffffe, 30),
    (0xffffff3, 28),
    (0xffffff4, 28),
    (0xffffff5, 28),
    (0xffffff6, 28),
    (0xffffff7, 28),
    (0xffffff8, 28),
    (0xffffff9, 28),
    (0xffffffa, 28),
    (0xffffffb, 28),
    (0x14, 6),
    (0x3f8, 10),
    (0x3f9, 10),
    (0xffa, 12),
    (0x1ff9, 13),
    (0x15, 6),
    (0xf8, 8),
    (0x7fa, 11),
    (0x3fa, 10),
    (0x3fb, 10),
    (0xf9, 8),
    (0x7fb, 11),
    (0xfa, 8),
    (0x16, 6),
    (0x17, 6),
    (0x18, 6),
    (0x0, 5),
    (0x1, 5),
    (0x2, 5),
    (0x19, 6),
    (0x1a, 6),
    (0x1b, 6),
    (0x1c, 6),
    (0x1d, 6),
    (0x1e, 6),
    (0x1f, 6),
    (0x5c, 7),
    (0xfb, 8),
    (0x7ffc, 15),
    (0x20, 6),
    (0xffb, 12),
    (0x3fc, 10),
    (0x1ffa, 13),
    (0x21, 6),
    (0x5d, 7),
    (0x5e, 7),
    (0x5f, 7),
    (0x60, 7),
    (0x61, 7),
    (0x62, 7),
    (0x63, 7),
    (0x64, 7),
    (0x65, 7),
    (0x66, 7),
    (0x67, 7),
    (0x68, 7),
    (0x69, 7),
    (0x6a, 7),
    (0x6b, 7),
    (0x6c, 7),
    (0x6d, 7),
    (0x6e, 7),
    (0x6f, 7),
    (0x70, 7),
    (0x71, 7),
    (0x72, 7),
    (0xfc, 8),
    (0x73, 7),
    (0xfd, 8),
    (0x1ffb, 13),
    (0x7fff0, 19),
    (0x1ffc, 13),
    (0x3ffc, 14),
    (0x22, 6),
    (0x7ffd, 15),
    (0x3, 5),
    (0x23, 6),
    (0x4, 5),
    (0x24, 6),
    (0x5, 5),
    (0x25, 6),
    (0x26, 6),
    (0x27, 6),
    (0x6, 5),
    (0x74, 7),
    (0x75, 7),
    (0x28, 6),
    (0x29, 6),
    (0x2a, 6),
    (0x7, 5),
    (0x2b, 6),
    (0x76, 7),
    (0x2c, 6),
    (0x8, 5),
    (0x9, 5),
    (0x2d, 6),
    (0x77, 7),
    (0x78, 7),
    (0x79, 7),
    (0x7a, 7),
    (0x7b, 7),
    (0x7ffe, 15),
    (0x7fc, 11),
    (0x3ffd, 14),
    (0x1ffd, 13),
    (0xffffffc, 28),
    (0xfffe6, 20),
    (0x3fffd2, 22),
    (0xfffe7, 20),
    (0xfffe8, 20),
    (0x3fffd3, 22),
    (0x3fffd4, 22),
    (0x3fffd5, 22),
    (0x7fffd9, 23),
    (0x3fffd6, 22),
    (0x7fffda, 23),
    (0x7fffdb, 23),
    (0x7fffdc, 23),
    (0x7fffdd, 23),
    (0x7fffde, 23),
    (0xffffeb, 24),
    (0x7fffdf, 23),
    (0xffffec, 24),
    (0xffffed, 24),
    (0x3fffd7, 22),
    (0x7fffe0, 23),
    (0xffffee, 24),
    (0x7fffe1, 23),
    (0x7fffe2, 23),
    (0x7fffe3, 23),
    (0x7fffe4, 23),
    (0x1fffdc, 21),
    (0x3fffd8, 22),
    (0x7fffe5, 23),
    (0x3fffd9, 22),
    (0x7fffe6, 23),
    (0x7fffe7, 23),
    (0xffffef, 24),
    (0x3fffda, 22),
    (0x1fffdd, 21),
    (0xfffe9, 20),
    (0x3fffdb, 22),
    (0x3fffdc, 22),
    (0x7fffe8, 23),
    (0x7fffe9, 23),
    (0x1fffde, 21),
    (0x7fffea, 23),
    (0x3fffdd, 22),
    (0x3fffde, 22),
    (0xfffff0, 24),
    (0x1fffdf, 21),
    (0x3fffdf, 22),
    (0x7fffeb, 23),
    (0x7fffec, 23),
    (0x1fffe0, 21),
    (0x1fffe1, 21),
    (0x3fffe0, 22),
    (0x1fffe2, 21),
    (0x7fffed, 23),
    (0x3fffe1, 22),
    (0x7fffee, 23),
    (0x7fffef, 23),
    (0xfffea, 20),
    (0x3fffe2, 22),
    (0x3fffe3, 22),
    (0x3fffe4, 22),
    (0x7ffff0, 23),
    (0x3fffe5, 22),
    (0x3fffe6, 22),
    (0x7ffff1, 23),
    (0x3ffffe0, 26),
    (0x3ffffe1, 26),
    (0xfffeb, 20),
    (0x7fff1, 19),
    (0x3fffe7, 22),
    (0x7ffff2, 23),
    (0x3fffe8, 22),
    (0x1ffffec, 25),
    (0x3ffffe2, 26),
    (0x3ffffe3, 26),
    (0x3ffffe4, 26),
    (0x7ffffde, 27),
    (0x7ffffdf, 27),
    (0x3ffffe5, 26),
    (0xfffff1, 24),
    (0x1ffffed, 25),
    (0x7fff2, 19),
    (0x1fffe3, 21),
    (0x3ffffe6, 26),
    (0x7ffffe0, 27),
    (0x7ffffe1, 27),
    (0x3ffffe7, 26),
    (0x7ffffe2, 27),
    (0xfffff2, 24),
    (0x1fffe4, 21),
    (0x1fffe5, 21),
    (0x3ffffe8, 26),
    (0x3ffffe9, 26),
    (0xffffffd, 28),
    (0x7ffffe3, 27),
    (0x7ffffe4, 27),
    (0x7ffffe5, 27),
    (0xfffec, 20),
    (0xfffff3, 24),
    (0xfffed, 20),
    (0x1fffe6, 21),
    (0x3fffe9, 22),
    (0x1fffe7, 21),
    (0x1fffe8, 21),
    (0x7ffff3, 23),
    (0x3fffea, 22),
    (0x3fffeb, 22),
    (0x1ffffee, 25),
    (0x1ffffef, 25),
    (0xfffff4, 24),
    (0xfffff5, 24),
    (0x3ffffea, 26),
    (0x7ffff4, 23),
    (0x3ffffeb, 26),
    (0x7ffffe6, 27),
    (0x3ffffec, 26),
    (0x3ffffed, 26),
    (0x7ffffe7, 27),
    (0x7ffffe8, 27),
    (0x7ffffe9, 27),
    (0x7ffffea, 27),
    (0x7ffffeb, 27),
    (0xffffffe, 28),
    (0x7ffffec, 27),
    (0x7ffffed, 27),
    (0x7ffffee, 27),
    (0x7ffffef, 27),
    (0x7fffff0, 27),
    (0x3ffffee, 26),
    (0x3fffffff, 30),
];

/// `PRIMARY[next 11 bits]`: the first symbol (bits 0-7), the second
/// (8-15), the first's code length (16-19), the length of both (20-23) and
/// the number of symbols (24-25: 0 when the first code is longer than
/// `PEEK` bits).
static PRIMARY: [u32; 1 << PEEK] = build_primary();

const fn build_primary() -> [u32; 1 << PEEK] {
    let mut t = [0u32; 1 << PEEK];
    let mut first = 0;
    while first < 256 {
        let (code1, len1) = CODES[first];
        let len1 = len1 as u32;
        if len1 <= PEEK {
            let one = (1 << 24) | (len1 << 20) | (len1 << 16) | first as u32;
            fill(&mut t, code1 << (PEEK - len1), PEEK - len1, one);
            let mut second = 0;
            while second < 256 {
                let (code2, len2) = CODES[second];
                let len = len1 + len2 as u32;
                if len <= PEEK {
                    let two = (2 << 24)
                        | (len << 20)
                        | (len1 << 16)
                        | ((second as u32) << 8)
                        | first as u32;
                    fill(
                        &mut t,
                        ((code1 << len2) | code2) << (PEEK - len),
                        PEEK - len,
                        two,
                    );
                }
                second += 1;
            }
        }
        first += 1;
    }
    t
}

/// Sets the `2^free` entries from `start` to `entry`.
const fn fill(t: &mut [u32; 1 << PEEK], start: u32, free: u32, entry: u32) {
    let mut k = 0;
    while k < 1 << free {
        t[(start + k) as usize] = entry;
        k += 1;
    }
}

/// The canonical layout of the code, by length: the first code of each
/// length, how many codes have it, and where its symbols start in
/// `sorted` (symbols ordered by code).
struct Canonical {
    first: [u32; 31],
    count: [u32; 31],
    offset: [u16; 31],
    sorted: [u16; 257],
}

static CANONICAL: Canonical = build_canonical();

const fn build_canonical() -> Canonical {
    let mut count = [0u32; 31];
    let mut sym = 0;
    while sym < 257 {
        count[CODES[sym].1 as usize] += 1;
        sym += 1;
    }
    let mut first = [0u32; 31];
    let mut offset = [0u16; 31];
    let mut len = 1;
    while len < 31 {
        first[len] = (first[len - 1] + count[len - 1]) << 1;
        offset[len] = offset[len - 1] + count[len - 1] as u16;
        len += 1;
    }
    let mut sorted = [0u16; 257];
    let mut placed = [0u16; 31];
    let mut sym = 0;
    while sym < 257 {
        let len = CODES[sym].1 as usize;
        sorted[(offset[len] + placed[len]) as usize] = sym as u16;
        placed[len] += 1;
        sym += 1;
    }
    Canonical {
        first,
        count,
        offset,
        sorted,
    }
}

/// Appends the Huffman decoding of `src` to `out`.
///
/// Errors (RFC 7541 §5.2): the EOS symbol, padding of 8 bits or more, or
/// padding that is not the most significant bits of EOS (all ones).
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    // The shortest code has 5 bits: at most 8 symbols per 5 bytes, and a
    // lookup may write one byte past the last symbol.
    // Written through the spare capacity: zeroing it first (`resize`)
    // costs more than the decoding of a short `:path`.
    out.reserve(src.len() * 8 / 5 + 2);
    let start = out.len();
    let n = decode_into(src, out.spare_capacity_mut())?;
    // SAFETY: `decode_into` initialized the first `n` bytes of the spare
    // capacity (every byte below the count it returns was written), and
    // `start + n` is within the capacity reserved above.
    unsafe { out.set_len(start + n) };
    Ok(())
}

/// Decodes `src` into `buf`, returning the number of bytes written (every
/// one of them initialized).
fn decode_into(src: &[u8], buf: &mut [MaybeUninit<u8>]) -> Result<usize, DecodeError> {
    let mut n = 0;
    // The next bits, most significant first; bits below the `nbits` valid
    // ones are either zero or the true following bits of the input.
    let mut acc: u64 = 0;
    let mut nbits: u32 = 0;
    let mut pos = 0;
    loop {
        if nbits < 32 {
            if let Some(word) = src.get(pos..).and_then(|s| s.first_chunk::<8>()) {
                acc |= u64::from_be_bytes(*word) >> nbits;
                let bytes = (64 - nbits) / 8;
                pos += bytes as usize;
                nbits += bytes * 8;
            } else {
                while nbits <= 56 {
                    let Some(&b) = src.get(pos) else { break };
                    acc |= u64::from(b) << (56 - nbits);
                    nbits += 8;
                    pos += 1;
                }
                if nbits == 0 {
                    return Ok(n);
                }
            }
        }
        // Fewer than 32 valid bits only once the input is exhausted, and
        // then the bits below them are zero.
        let entry = PRIMARY[(acc >> (64 - PEEK)) as usize];
        let count = entry >> 24;
        let len = (entry >> 20) & 0xf;
        if count != 0 && len <= nbits {
            buf[n].write(entry as u8);
            buf[n + 1].write((entry >> 8) as u8);
            n += count as usize;
            acc <<= len;
            nbits -= len;
            continue;
        }
        let len1 = (entry >> 16) & 0xf;
        if count != 0 && len1 <= nbits {
            // Near the end: the second symbol came from the zero fill.
            buf[n].write(entry as u8);
            n += 1;
            acc <<= len1;
            nbits -= len1;
            continue;
        }
        if count == 0 {
            if let Some((sym, len)) = decode_long(acc, nbits) {
                if sym == EOS {
                    return Err(DecodeError::BadHuffman);
                }
                buf[n].write(sym as u8);
                n += 1;
                acc <<= len;
                nbits -= len;
                continue;
            }
        }
        // The input ends inside a code: only padding may remain.
        return if nbits < 8 && acc >> (64 - nbits) == (1u64 << nbits) - 1 {
            Ok(n)
        } else {
            Err(DecodeError::BadHuffman)
        };
    }
}

/// The symbol of a code longer than `PEEK` bits at the top of `acc`, and
/// its length; `None` if the `nbits` valid bits end before the code does.
#[cold]
fn decode_long(acc: u64, nbits: u32) -> Option<(u16, u32)> {
    let c = &CANONICAL;
    let mut len = PEEK + 1;
    while len <= 30 && len <= nbits {
        let l = len as usize;
        // Not a shorter code, so at least `first[len]` (canonical code).
        let code = (acc >> (64 - len)) as u32;
        if code.wrapping_sub(c.first[l]) < c.count[l] {
            return Some((
                c.sorted[c.offset[l] as usize + (code - c.first[l]) as usize],
                len,
            ));
        }
        len += 1;
    }
    None
}

/// The length in bytes of the Huffman encoding of `src`.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| usize::from(CODES[b as usize].1)).sum();
    bits.div_ceil(8)
}

/// Appends the Huffman encoding of `src` to `out`, padded with ones.
pub fn encode(src: &[u8], out: &mut Vec<u8>) {
    // Chosen only when shorter than the input.
    out.reserve(src.len());
    // The pending bits are the low `nbits` of `acc`: fewer than 32 + 30.
    let mut acc: u64 = 0;
    let mut nbits: u32 = 0;
    for &b in src {
        let (code, len) = CODES[b as usize];
        acc = (acc << len) | u64::from(code);
        nbits += u32::from(len);
        if nbits >= 32 {
            nbits -= 32;
            out.extend_from_slice(&((acc >> nbits) as u32).to_be_bytes());
        }
    }
    while nbits >= 8 {
        nbits -= 8;
        out.push((acc >> nbits) as u8);
    }
    if nbits > 0 {
        let pad = 8 - nbits;
        out.push(((acc << pad) | ((1 << pad) - 1)) as u8);
    }
}
