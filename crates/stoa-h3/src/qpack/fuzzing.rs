//! The properties the `qpack` fuzz target checks (see [`fuzz_check`]).
//! Not API.

use super::{Decoded, Decoder, Encoder, Fields, QpackError};

/// Input layout: byte 0 picks the table capacity we announce (bits 0-1:
/// 0, 64, 220 or 4096), the blocked streams allowed (bits 2-3) and the
/// section size limit (bits 4-5: none, 64, 512, 16384); byte 1 (modulo
/// the rest's length + 1) is how much of the rest is encoder-stream
/// input, the remainder a field section of stream 0. Panics when a
/// property breaks:
///
/// - the encoder stream fed in two pieces (cut at byte 1's value again)
///   gives the same result and table as fed whole;
/// - the table never exceeds the capacity set, nor that our maximum;
/// - a decoded section stays within the size limit, and its fields,
///   encoded again with `Encoder`, decode to the same;
/// - every error is one of QPACK's, never a panic.
pub fn fuzz_check(data: &[u8]) {
    let (sel, cut, rest) = match data {
        [a, b, rest @ ..] => (*a, usize::from(*b), rest),
        _ => return,
    };
    let capacity = [0, 64, 220, 4096][usize::from(sel & 3)];
    let blocked = u64::from((sel >> 2) & 3);
    let max_size = [usize::MAX, 64, 512, 16384][usize::from((sel >> 4) & 3)];
    let cut = cut % (rest.len() + 1);
    let (enc, section) = rest.split_at(cut);

    let mut whole = Decoder::new(capacity, blocked);
    let r_whole = whole.feed_encoder(enc);
    let mut split = Decoder::new(capacity, blocked);
    let half = cut / 2;
    let r_split = split
        .feed_encoder(&enc[..half])
        .and_then(|()| split.feed_encoder(&enc[half..]));
    assert_eq!(r_whole.is_ok(), r_split.is_ok(), "split feeding differs");
    if r_whole.is_ok() {
        assert!(whole.entries().eq(split.entries()), "tables differ");
    }
    for d in [&whole, &split] {
        assert!(d.table_size() <= d.capacity(), "table past its capacity");
        assert!(d.capacity() as u64 <= capacity, "capacity past our maximum");
    }
    if r_whole.is_err() {
        return;
    }
    let mut fields = Fields::new();
    match whole.decode(0, section, max_size, &mut fields) {
        Ok(Decoded::Done) => {
            assert!(fields.size() <= max_size, "section past the limit");
            let mut again = Vec::new();
            Encoder::prefix(&mut again);
            for (n, v) in fields.iter() {
                Encoder::field(&mut again, n, v);
            }
            let mut plain = Decoder::new(0, 0);
            let mut back = Fields::new();
            assert_eq!(
                plain.decode(0, &again, usize::MAX, &mut back),
                Ok(Decoded::Done)
            );
            assert_eq!(back, fields, "re-encoded fields differ");
        }
        Ok(Decoded::Blocked) => assert!(whole.is_blocked(0)),
        Err(QpackError::Decompression(_) | QpackError::TooLarge) => {}
        Err(e) => panic!("a section gave {e:?}"),
    }
}

/// A pseudo-random input made of QPACK fragments (for the unit test that
/// runs the check without libFuzzer).
pub fn generate(seed: u64) -> Vec<u8> {
    const PIECES: [&[u8]; 12] = [
        &[0x3f, 0xbd, 0x01],
        &[0xc0, 0x03, b'a', b'.', b'b'],
        &[0xc1, 0x02, b'/', b'x'],
        &[
            0x4a, b'c', b'u', b's', b't', b'o', b'm', b'-', b'k', b'e', b'y', 0x01, b'v',
        ],
        &[0x00],
        &[0x02],
        &[0x80, 0x01, b'z'],
        &[0x03, 0x81, 0x10, 0x11],
        &[0x00, 0x00, 0xd1, 0xd7],
        &[0x51, 0x84, 0x62, 0x61, 0x9c, 0x3f],
        &[0x27, 0x02, b'x', b'-', b'y', b'z', 0x01, b'w'],
        &[0x02, 0x80, 0x80, 0x10],
    ];
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as usize
    };
    let mut out = vec![next() as u8, 0];
    let n = next() % 8;
    for _ in 0..n {
        out.extend_from_slice(PIECES[next() % PIECES.len()]);
    }
    out[1] = (next() % (out.len() - 1)) as u8;
    // Now and then a random byte flipped.
    if next() % 3 == 0 && out.len() > 2 {
        let i = 2 + next() % (out.len() - 2);
        out[i] ^= 1 << (next() % 8);
    }
    out
}
