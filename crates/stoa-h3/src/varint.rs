//! QUIC variable-length integers (RFC 9000 §16): the two high bits of
//! the first byte give the length (1, 2, 4 or 8 bytes), the rest is the
//! value, big-endian, up to 2^62 - 1.

/// The largest value a varint holds.
pub const MAX: u64 = (1 << 62) - 1;

/// Decodes the varint at the start of `buf`: (value, bytes used), or None
/// when `buf` ends before it does.
pub fn decode(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let len = 1usize << (first >> 6);
    let bytes = buf.get(..len)?;
    let mut v = u64::from(first & 0x3f);
    for &b in &bytes[1..] {
        v = (v << 8) | u64::from(b);
    }
    Some((v, len))
}

/// The number of bytes `encode` uses for `v`.
pub fn len(v: u64) -> usize {
    match v {
        0..=63 => 1,
        64..=16383 => 2,
        16384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends `v` (at most [`MAX`]; larger values are clamped to it) in its
/// shortest form.
pub fn encode(out: &mut Vec<u8>, v: u64) {
    let v = v.min(MAX);
    match len(v) {
        1 => out.push(v as u8),
        2 => out.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9000_appendix_a_1_sample_varints_decode() {
        let cases: [(&[u8], u64); 4] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ];
        for (bytes, want) in cases {
            assert_eq!(decode(bytes), Some((want, bytes.len())));
            let mut out = Vec::new();
            encode(&mut out, want);
            assert_eq!(out, bytes);
        }
        // A two-byte encoding of 37 is legal too (§16: not minimal).
        assert_eq!(decode(&[0x40, 0x25]), Some((37, 2)));
    }

    #[test]
    fn a_varint_cut_short_is_not_decoded() {
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[0x7b]), None);
        assert_eq!(decode(&[0x9d, 0x7f, 0x3e]), None);
    }

    #[test]
    fn every_boundary_round_trips_in_its_shortest_form() {
        for v in [0, 63, 64, 16383, 16384, 1_073_741_823, 1_073_741_824, MAX] {
            let mut out = Vec::new();
            encode(&mut out, v);
            assert_eq!(out.len(), len(v));
            assert_eq!(decode(&out), Some((v, out.len())));
        }
    }
}
