//! HPACK tests: RFC 7541 Appendix C vectors byte for byte, every
//! `DecodeError`, the dynamic table against a plain model, and round trips
//! from `Encoder` to `Decoder`.

use super::{copy_out, huffman, DecodeError, Decoder, Encoder, Str, STATIC};

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

fn decode_limited(d: &mut Decoder, block: &[u8], max: usize) -> (Fields, Result<(), DecodeError>) {
    let mut fields = Vec::new();
    let r = d.decode(block, max, &mut |n, v| {
        fields.push((n.to_vec(), v.to_vec()))
    });
    (fields, r)
}

fn decode(d: &mut Decoder, block: &[u8]) -> Result<Fields, DecodeError> {
    let (fields, r) = decode_limited(d, block, usize::MAX);
    r.map(|()| fields)
}

/// The dynamic table, newest first, and its size (§4.1).
fn table_entries(d: &Decoder) -> (Fields, usize) {
    let mut out = Vec::new();
    for i in 0..d.table.len() {
        let Ok((name, value)) = d.indexed(STATIC.len() + 1 + i) else {
            unreachable!("entry {i} of {}", d.table.len());
        };
        let mut scratch = Vec::new();
        let mut bytes = |s: Str| match s {
            Str::Table(off, len) => {
                scratch.clear();
                copy_out(&d.table, &mut scratch, off, len);
                scratch.clone()
            }
            _ => unreachable!("a dynamic entry outside the table"),
        };
        out.push((bytes(name), bytes(value)));
    }
    (out, d.table.size())
}

fn list(pairs: &[(&str, &str)]) -> Fields {
    pairs
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// Decodes `block`, expecting `fields`, then the dynamic table `table`
/// (newest first) of `size` octets.
fn expect(
    d: &mut Decoder,
    block: &str,
    fields: &[(&str, &str)],
    table: &[(&str, &str)],
    size: usize,
) {
    assert_eq!(decode(d, &hex(block)), Ok(list(fields)));
    assert_eq!(table_entries(d), (list(table), size));
}

// RFC 7541 Appendix C.1: integer representation.

#[test]
fn integers_encode_and_decode_as_in_rfc7541_appendix_c1() {
    // C.1.1: 10 with a 5-bit prefix; C.1.2: 1337 with a 5-bit prefix.
    // (C.1.3 uses an 8-bit prefix, which no representation has.)
    for (value, wire) in [(10, &[0x0a][..]), (1337, &[0x1f, 0x9a, 0x0a])] {
        let mut out = Vec::new();
        super::encode_integer(&mut out, 0, 5, value);
        assert_eq!(out, wire, "{value}");
        let mut pos = 0;
        assert_eq!(super::integer(wire, &mut pos, 5), Ok(value));
        assert_eq!(pos, wire.len());
    }
}

// RFC 7541 Appendix C.2: header field representations.

#[test]
fn a_literal_with_incremental_indexing_enters_the_table_rfc7541_c2_1() {
    let mut d = Decoder::new(4096);
    expect(
        &mut d,
        "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        &[("custom-key", "custom-header")],
        &[("custom-key", "custom-header")],
        55,
    );
}

#[test]
fn a_literal_without_indexing_leaves_the_table_empty_rfc7541_c2_2() {
    let mut d = Decoder::new(4096);
    expect(
        &mut d,
        "040c 2f73 616d 706c 652f 7061 7468",
        &[(":path", "/sample/path")],
        &[],
        0,
    );
}

#[test]
fn a_never_indexed_literal_leaves_the_table_empty_rfc7541_c2_3() {
    let mut d = Decoder::new(4096);
    expect(
        &mut d,
        "1008 7061 7373 776f 7264 0673 6563 7265 74",
        &[("password", "secret")],
        &[],
        0,
    );
}

#[test]
fn an_indexed_field_comes_from_the_static_table_rfc7541_c2_4() {
    let mut d = Decoder::new(4096);
    expect(&mut d, "82", &[(":method", "GET")], &[], 0);
}

// RFC 7541 Appendix C.3 and C.4: requests on one connection.

const REQ1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQ2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQ3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];
const REQ_T1: &[(&str, &str)] = &[(":authority", "www.example.com")];
const REQ_T2: &[(&str, &str)] = &[
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];
const REQ_T3: &[(&str, &str)] = &[
    ("custom-key", "custom-value"),
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];

#[test]
fn three_requests_without_huffman_decode_as_in_rfc7541_c3() {
    let mut d = Decoder::new(4096);
    expect(
        &mut d,
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        REQ1,
        REQ_T1,
        57,
    );
    expect(
        &mut d,
        "8286 84be 5808 6e6f 2d63 6163 6865",
        REQ2,
        REQ_T2,
        110,
    );
    expect(
        &mut d,
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        REQ3,
        REQ_T3,
        164,
    );
}

#[test]
fn three_requests_with_huffman_decode_as_in_rfc7541_c4() {
    let mut d = Decoder::new(4096);
    expect(
        &mut d,
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        REQ1,
        REQ_T1,
        57,
    );
    expect(&mut d, "8286 84be 5886 a8eb 1064 9cbf", REQ2, REQ_T2, 110);
    expect(
        &mut d,
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        REQ3,
        REQ_T3,
        164,
    );
}

// RFC 7541 Appendix C.5 and C.6: responses with a 256-octet table, so
// that entries are evicted (and the ring wraps).

const DATE1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOC: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::new(256);
    expect(
        &mut d,
        blocks[0],
        &[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", DATE1),
            ("location", LOC),
        ],
        &[
            ("location", LOC),
            ("date", DATE1),
            ("cache-control", "private"),
            (":status", "302"),
        ],
        222,
    );
    expect(
        &mut d,
        blocks[1],
        &[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", DATE1),
            ("location", LOC),
        ],
        &[
            (":status", "307"),
            ("location", LOC),
            ("date", DATE1),
            ("cache-control", "private"),
        ],
        222,
    );
    expect(
        &mut d,
        blocks[2],
        &[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", DATE2),
            ("location", LOC),
            ("content-encoding", "gzip"),
            ("set-cookie", COOKIE),
        ],
        &[
            ("set-cookie", COOKIE),
            ("content-encoding", "gzip"),
            ("date", DATE2),
        ],
        215,
    );
}

#[test]
fn three_responses_without_huffman_decode_and_evict_as_in_rfc7541_c5() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
         3d31",
    ]);
}

#[test]
fn three_responses_with_huffman_decode_and_evict_as_in_rfc7541_c6() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

#[test]
fn huffman_encoding_matches_the_strings_of_rfc7541_c4_and_c6() {
    for (text, wire) in [
        ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
        ("no-cache", "a8eb 1064 9cbf"),
        ("custom-key", "25a8 49e9 5ba9 7d7f"),
        ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
        ("302", "6402"),
        ("307", "640e ff"),
        ("private", "aec3 771a 4b"),
        (
            DATE1,
            "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
        ),
        (
            DATE2,
            "d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff",
        ),
        (LOC, "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3"),
        ("gzip", "9bd9 ab"),
        (
            COOKIE,
            "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587
             3160 65c0 03ed 4ee5 b106 3d50 07",
        ),
    ] {
        let mut out = Vec::new();
        huffman::encode(text.as_bytes(), &mut out);
        assert_eq!(out, hex(wire), "{text}");
        assert_eq!(huffman::encoded_len(text.as_bytes()), out.len(), "{text}");
        let mut back = Vec::new();
        assert_eq!(huffman::decode(&out, &mut back), Ok(()));
        assert_eq!(back, text.as_bytes());
    }
}

// RFC 7541 §5.2: the Huffman code.

#[test]
fn every_byte_value_survives_a_huffman_round_trip_alone_and_in_runs() {
    let all: Vec<u8> = (0..=255).collect();
    let mut inputs: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    inputs.push(all.clone());
    inputs.push(all.iter().rev().copied().collect());
    // Long codes (up to 30 bits) next to short ones, at every alignment.
    for shift in 0..8 {
        let mut v = vec![b'a'; shift];
        v.extend_from_slice(&[0x0a, b'e', 0xff, 0x16, b'0', 0xc0, b'\\', 0x7f]);
        inputs.push(v);
    }
    for input in inputs {
        let mut enc = Vec::new();
        huffman::encode(&input, &mut enc);
        assert_eq!(enc.len(), huffman::encoded_len(&input));
        let mut dec = vec![b'x'];
        assert_eq!(huffman::decode(&enc, &mut dec), Ok(()), "{input:?}");
        assert_eq!(&dec[1..], &input[..], "decode appends after what is there");
    }
}

#[test]
fn the_huffman_code_is_complete_and_canonical_as_the_fast_decoder_assumes() {
    // Kraft equality: sum of 2^-len over all 257 codes is exactly 1.
    let total: u64 = huffman::CODES
        .iter()
        .map(|&(_, len)| 1u64 << (30 - len))
        .sum();
    assert_eq!(total, 1 << 30);
    // Canonical: ordered by (length, symbol), each code is the previous
    // plus one, shifted to its length.
    let mut order: Vec<usize> = (0..257).collect();
    order.sort_by_key(|&s| (huffman::CODES[s].1, s));
    let mut prev: Option<(u32, u8)> = None;
    for s in order {
        let (code, len) = huffman::CODES[s];
        if let Some((pc, pl)) = prev {
            assert_eq!(code, (pc + 1) << (len - pl), "symbol {s}");
        } else {
            assert_eq!(code, 0);
        }
        prev = Some((code, len));
    }
}

#[test]
fn huffman_padding_of_up_to_seven_one_bits_is_accepted_rfc7541_5_2() {
    // 'a' is 00011 (5 bits): 3 bits of padding.
    let mut out = Vec::new();
    assert_eq!(huffman::decode(&[0b0001_1111], &mut out), Ok(()));
    assert_eq!(out, b"a");
    // '0' '0' '0' are 15 bits: 1 bit of padding.
    out.clear();
    assert_eq!(huffman::decode(&[0x00, 0x01], &mut out), Ok(()));
    assert_eq!(out, b"000");
    // The empty string.
    out.clear();
    assert_eq!(huffman::decode(&[], &mut out), Ok(()));
    assert!(out.is_empty());
}

#[test]
fn huffman_padding_of_eight_bits_or_more_is_an_error_rfc7541_5_2() {
    // 'a' then a whole byte of ones: 11 padding bits.
    assert_eq!(
        huffman::decode(&[0b0001_1111, 0xff], &mut Vec::new()),
        Err(DecodeError::BadHuffman)
    );
    // A lone byte of ones: a prefix of EOS 8 bits long.
    assert_eq!(
        huffman::decode(&[0xff], &mut Vec::new()),
        Err(DecodeError::BadHuffman)
    );
}

#[test]
fn huffman_padding_that_is_not_all_ones_is_an_error_rfc7541_5_2() {
    // 'a' (00011) then 000: the start of another code, not EOS's prefix.
    assert_eq!(
        huffman::decode(&[0b0001_1000], &mut Vec::new()),
        Err(DecodeError::BadHuffman)
    );
    assert_eq!(
        huffman::decode(&[0b0001_1110], &mut Vec::new()),
        Err(DecodeError::BadHuffman)
    );
}

#[test]
fn a_huffman_eos_symbol_is_an_error_rfc7541_5_2() {
    // EOS: 30 ones, then 2 bits of padding.
    assert_eq!(
        huffman::decode(&[0xff; 4], &mut Vec::new()),
        Err(DecodeError::BadHuffman)
    );
    // 'a' then EOS: 5 + 30 bits, 5 bits of padding.
    assert_eq!(
        huffman::decode(&[0b0001_1111, 0xff, 0xff, 0xff, 0xff], &mut Vec::new()),
        Err(DecodeError::BadHuffman)
    );
}

// Every DecodeError from a whole block.

#[test]
fn an_integer_that_ends_with_the_block_is_truncated_rfc7541_5_1() {
    let mut d = Decoder::new(4096);
    // Indexed field, index needs continuation bytes that are missing.
    assert_eq!(decode(&mut d, &[0xff]), Err(DecodeError::Truncated));
    assert_eq!(decode(&mut d, &[0xff, 0x80]), Err(DecodeError::Truncated));
}

#[test]
fn a_string_longer_than_the_rest_of_the_block_is_truncated_rfc7541_5_2() {
    let mut d = Decoder::new(4096);
    // Literal with a new name, name length 10, 3 bytes follow.
    assert_eq!(
        decode(&mut d, &hex("400a 6375 73")),
        Err(DecodeError::Truncated)
    );
    // Name complete, value length missing.
    assert_eq!(decode(&mut d, &hex("0001 61")), Err(DecodeError::Truncated));
    // Indexed name, value length 5, 1 byte.
    assert_eq!(decode(&mut d, &hex("0405 2f")), Err(DecodeError::Truncated));
    // A length whose continuation is missing.
    assert_eq!(decode(&mut d, &hex("047f")), Err(DecodeError::Truncated));
}

#[test]
fn an_integer_past_32_bits_is_an_overflow_rfc7541_5_1() {
    let mut d = Decoder::new(4096);
    // 127 + 2^32 with a 7-bit prefix.
    assert_eq!(
        decode(&mut d, &hex("ff 81 80 80 80 10")),
        Err(DecodeError::IntegerOverflow)
    );
    // Endless zero continuations.
    assert_eq!(
        decode(&mut d, &hex("ff 80 80 80 80 80 80 80 00")),
        Err(DecodeError::IntegerOverflow)
    );
    // 2^32 - 1 exactly fits: it is then too large an index, not an overflow.
    assert_eq!(
        decode(&mut d, &hex("ff 80 ff ff ff 0f")),
        Err(DecodeError::BadIndex)
    );
    // A string length that fits 32 bits but not the block.
    assert_eq!(
        decode(&mut d, &hex("04 7f 80 ff ff ff 0f")),
        Err(DecodeError::Truncated)
    );
}

#[test]
fn index_zero_is_an_error_rfc7541_6_1() {
    let mut d = Decoder::new(4096);
    assert_eq!(decode(&mut d, &[0x80]), Err(DecodeError::BadIndex));
}

#[test]
fn an_index_past_the_tables_is_an_error_rfc7541_2_3_3() {
    let mut d = Decoder::new(4096);
    // 62 with an empty dynamic table: as an indexed field and as a name.
    assert_eq!(decode(&mut d, &[0xbe]), Err(DecodeError::BadIndex));
    assert_eq!(decode(&mut d, &hex("7e 01 61")), Err(DecodeError::BadIndex));
    assert_eq!(
        decode(&mut d, &hex("0f 2f 01 61")),
        Err(DecodeError::BadIndex)
    );
    // One entry: 62 works, 63 does not.
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode(&mut d, &hex("4001 6101 62")),
        Ok(list(&[("a", "b")]))
    );
    assert_eq!(decode(&mut d, &[0xbe]), Ok(list(&[("a", "b")])));
    assert_eq!(decode(&mut d, &[0xbf]), Err(DecodeError::BadIndex));
    // Index 61 is the last static entry.
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode(&mut d, &[0xbd]),
        Ok(list(&[("www-authenticate", "")]))
    );
}

#[test]
fn a_bad_huffman_string_in_a_block_is_an_error_rfc7541_5_2() {
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode(&mut d, &hex("0481 ff")),
        Err(DecodeError::BadHuffman)
    );
    assert_eq!(
        decode(&mut d, &hex("0084 ffff ffff 0161")),
        Err(DecodeError::BadHuffman)
    );
}

#[test]
fn a_size_update_above_our_limit_is_an_error_rfc7541_6_3() {
    let mut d = Decoder::new(4096);
    let mut block = Vec::new();
    Encoder::size_update(&mut block, 4097);
    assert_eq!(decode(&mut d, &block), Err(DecodeError::BadSizeUpdate));
    let mut block = Vec::new();
    Encoder::size_update(&mut block, 4096);
    block.push(0x82);
    assert_eq!(decode(&mut d, &block), Ok(list(&[(":method", "GET")])));
}

#[test]
fn a_size_update_after_a_field_is_an_error_rfc7541_4_2() {
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode(&mut d, &hex("82 20")),
        Err(DecodeError::BadSizeUpdate)
    );
    // Several at the start are fine (§4.2: the smallest, then the final).
    assert_eq!(
        decode(&mut d, &hex("20 3f e1 1f 82")),
        Ok(list(&[(":method", "GET")]))
    );
}

#[test]
fn a_size_update_evicts_down_to_the_new_size_rfc7541_4_3() {
    let mut d = Decoder::new(4096);
    decode(&mut d, &hex("4001 6101 62 4001 6301 64")).expect("two entries");
    assert_eq!(table_entries(&d).1, 68);
    // To 40: only the newest (c: d, 34 octets) stays.
    decode(&mut d, &hex("3f09")).expect("size update to 40");
    assert_eq!(table_entries(&d), (list(&[("c", "d")]), 34));
    // Inserting another evicts it at this size.
    decode(&mut d, &hex("4001 6501 66")).expect("insert");
    assert_eq!(table_entries(&d), (list(&[("e", "f")]), 34));
    // To 0: empty; then back up (never above the limit).
    decode(&mut d, &hex("20")).expect("size update to 0");
    assert_eq!(table_entries(&d), (list(&[]), 0));
    decode(&mut d, &hex("4001 6701 68")).expect("insert at size 0");
    assert_eq!(table_entries(&d), (list(&[]), 0));
    decode(&mut d, &hex("3fe1 1f 4001 6701 68")).expect("size back to 4096");
    assert_eq!(table_entries(&d), (list(&[("g", "h")]), 34));
}

#[test]
fn an_entry_larger_than_the_table_empties_it_rfc7541_4_4() {
    let mut d = Decoder::new(64);
    decode(&mut d, &hex("4001 6101 62")).expect("a small entry");
    let mut block = vec![0x40, 0x01, b'n', 0x20];
    block.extend_from_slice(&[b'v'; 32]);
    // 1 + 32 + 32 = 65 > 64: delivered, not stored, and the table is empty.
    let (fields, r) = decode_limited(&mut d, &block, usize::MAX);
    assert_eq!(r, Ok(()));
    assert_eq!(fields, vec![(b"n".to_vec(), vec![b'v'; 32])]);
    assert_eq!(table_entries(&d), (list(&[]), 0));
}

#[test]
fn a_new_entry_may_name_the_entry_its_insertion_evicts_rfc7541_4_4() {
    // Table of 70: "name-x: 1" is 39 octets; adding "name-x: 2" by index
    // 62 evicts the entry it takes its name from.
    let mut d = Decoder::new(70);
    decode(&mut d, &hex("4006 6e61 6d65 2d78 0131")).expect("first entry");
    assert_eq!(
        decode(&mut d, &hex("7e01 32")),
        Ok(list(&[("name-x", "2")]))
    );
    assert_eq!(table_entries(&d), (list(&[("name-x", "2")]), 39));
    assert_eq!(decode(&mut d, &[0xbe]), Ok(list(&[("name-x", "2")])));
}

#[test]
fn a_large_table_limit_costs_only_what_the_peer_fills() {
    let mut d = Decoder::new(1 << 30);
    assert_eq!(
        d.table.ring_capacity(),
        0,
        "nothing before the first insertion"
    );
    decode(&mut d, &hex("4001 6101 62")).expect("one entry");
    assert_eq!(d.table.ring_capacity(), 4096);
    let mut block = vec![0x40, 0x01, b'n'];
    super::encode_integer(&mut block, 0, 7, 5000);
    block.extend_from_slice(&[b'v'; 5000]);
    decode(&mut d, &block).expect("a 5 KB entry");
    assert_eq!(d.table.ring_capacity(), 8192);
    assert_eq!(d.table_len(), 2);
}

#[test]
fn a_table_of_size_zero_never_stores_anything() {
    let mut d = Decoder::new(0);
    assert_eq!(
        decode(&mut d, &hex("4001 6101 62")),
        Ok(list(&[("a", "b")]))
    );
    assert_eq!(decode(&mut d, &[0xbe]), Err(DecodeError::BadIndex));
    assert_eq!(decode(&mut d, &hex("21")), Err(DecodeError::BadSizeUpdate));
}

#[test]
fn a_list_past_the_limit_is_too_large_and_the_table_stays_in_sync_rfc9113_10_5_1() {
    let mut d = Decoder::new(4096);
    // Three fields of 34 octets each; the limit allows two.
    let block = hex("4001 6101 62 4001 6301 64 4001 6501 66");
    let (fields, r) = decode_limited(&mut d, &block, 68);
    assert_eq!(r, Err(DecodeError::ListTooLarge));
    assert_eq!(fields, list(&[("a", "b"), ("c", "d")]));
    // The third entry was still inserted: the next block can use it.
    assert_eq!(
        decode(&mut d, &[0xbe, 0xc0]),
        Ok(list(&[("e", "f"), ("a", "b")]))
    );
    // Exactly at the limit is fine.
    let (fields, r) = decode_limited(&mut d, &[0xbe, 0xbf], 68);
    assert_eq!((fields.len(), r), (2, Ok(())));
}

#[test]
fn a_decode_error_after_the_list_limit_is_reported_as_that_error() {
    let mut d = Decoder::new(4096);
    let (_, r) = decode_limited(&mut d, &hex("82 82 80"), 40);
    assert_eq!(r, Err(DecodeError::BadIndex));
}

#[test]
fn an_hpack_bomb_is_cut_at_the_list_limit() {
    // One 4 KiB entry then a thousand one-byte references to it: what
    // reaches the caller stays within the limit.
    let mut d = Decoder::new(8192);
    let mut block = vec![0x40, 0x01, b'x'];
    super::encode_integer(&mut block, 0, 7, 4000);
    block.extend_from_slice(&[b'y'; 4000]);
    block.extend_from_slice(&[0xbe; 1000]);
    let mut delivered = 0;
    let r = d.decode(&block, 16 * 1024, &mut |n, v| {
        delivered += n.len() + v.len() + 32
    });
    assert_eq!(r, Err(DecodeError::ListTooLarge));
    assert!(delivered <= 16 * 1024, "{delivered}");
}

// The dynamic table against a plain model, with entries wrapping around
// the ring's end.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn the_dynamic_table_matches_a_plain_model_through_thousands_of_insertions_and_evictions() {
    for limit in [0usize, 40, 100, 256, 4096, 10_000] {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ limit as u64);
        let mut d = Decoder::new(limit);
        let mut model: Vec<(Vec<u8>, Vec<u8>)> = Vec::new(); // newest first
        let mut max = limit;
        let size = |m: &Vec<(Vec<u8>, Vec<u8>)>| {
            m.iter().map(|(n, v)| n.len() + v.len() + 32).sum::<usize>()
        };
        for round in 0..3000 {
            let mut block = Vec::new();
            let mut want = Vec::new();
            if rng.below(20) == 0 {
                max = rng.below(limit + 1);
                Encoder::size_update(&mut block, max);
                while size(&model) > max {
                    model.pop();
                }
            }
            for _ in 0..rng.below(4) + 1 {
                let choice = rng.below(3);
                if choice == 0 && !model.is_empty() {
                    let i = rng.below(model.len());
                    super::encode_integer(&mut block, 0x80, 7, 62 + i);
                    want.push(model[i].clone());
                    continue;
                }
                let name_from = if !model.is_empty() && choice == 1 {
                    Some(rng.below(model.len()))
                } else {
                    None
                };
                let name: Vec<u8> = match name_from {
                    Some(i) => model[i].0.clone(),
                    None => (0..rng.below(40))
                        .map(|_| b'a' + rng.below(26) as u8)
                        .collect(),
                };
                let value: Vec<u8> = (0..rng.below(90)).map(|_| rng.next() as u8).collect();
                match name_from {
                    Some(i) => super::encode_integer(&mut block, 0x40, 6, 62 + i),
                    None => {
                        block.push(0x40);
                        super::encode_string(&mut block, &name);
                    }
                }
                super::encode_string(&mut block, &value);
                want.push((name.clone(), value.clone()));
                let entry = name.len() + value.len() + 32;
                if entry > max {
                    model.clear();
                } else {
                    while size(&model) + entry > max {
                        model.pop();
                    }
                    model.insert(0, (name, value));
                }
            }
            assert_eq!(
                decode(&mut d, &block),
                Ok(want),
                "limit {limit} round {round}"
            );
            assert_eq!(
                table_entries(&d),
                (model.clone(), size(&model)),
                "limit {limit} round {round}"
            );
        }
    }
}

// Encoder -> Decoder.

#[test]
fn every_status_code_round_trips_and_the_common_ones_are_one_byte() {
    for status in (100..=999).chain([0, 1, 99, 1000, u16::MAX]) {
        let mut block = Vec::new();
        Encoder::status(&mut block, status);
        let mut d = Decoder::new(4096);
        assert_eq!(
            decode(&mut d, &block),
            Ok(vec![(b":status".to_vec(), status.to_string().into_bytes())]),
            "{status}"
        );
        assert_eq!(d.table_len(), 0, "the encoder never indexes");
        if [200, 204, 206, 304, 400, 404, 500].contains(&status) {
            assert_eq!(block.len(), 1, "{status}");
        }
    }
}

#[test]
fn fields_round_trip_with_static_names_new_names_huffman_and_long_values() {
    let long = "x".repeat(300);
    let binary: String = (32u8..127).map(char::from).collect();
    let fields = [
        ("content-type", "text/html; charset=utf-8"),
        ("content-length", "1358"),
        ("etag", "\"5f3c-54e\""),
        ("last-modified", "Fri, 27 Nov 2026 01:17:00 GMT"),
        ("server", "stoa"),
        ("www-authenticate", ""),
        (":authority", "example.com"),
        ("x-custom", "value"),
        ("x-empty", ""),
        ("x-long", long.as_str()),
        ("x-printable", binary.as_str()),
        ("a-name-longer-than-one-hundred-and-twenty-seven-bytes-so-its-length-takes-two-bytes-in-the-prefix-integer-encoding-of-rfc7541-section-5-1", "v"),
    ];
    let mut block = Vec::new();
    Encoder::status(&mut block, 200);
    for (n, v) in fields {
        Encoder::field(&mut block, n.as_bytes(), v.as_bytes());
    }
    let mut d = Decoder::new(4096);
    let mut want = list(&[(":status", "200")]);
    want.extend(list(&fields));
    assert_eq!(decode(&mut d, &block), Ok(want));
    assert_eq!(d.table_len(), 0, "the encoder never indexes");
}

#[test]
fn a_static_name_is_sent_as_its_index_and_a_value_huffman_coded_when_shorter() {
    let mut block = Vec::new();
    Encoder::field(&mut block, b"content-length", b"1358");
    // Index 28 needs the 4-bit prefix's continuation: 0f 0d. "1358" is
    // 5+6+6+6 = 23 bits: 3 bytes, shorter than 4.
    assert_eq!(&block[..3], &[0x0f, 0x0d, 0x83]);
    assert_eq!(block.len(), 6);
    let mut block = Vec::new();
    Encoder::field(&mut block, b"age", b"\\");
    // '\\' is 19 bits: 3 bytes, longer than the 1-byte raw string.
    assert_eq!(block, [0x0f, 0x06, 0x01, b'\\']);
    let mut block = Vec::new();
    Encoder::field(&mut block, b"x", b"");
    assert_eq!(block, [0x00, 0x01, b'x', 0x00]);
}

#[test]
fn size_updates_encode_per_rfc7541_6_3_and_the_decoder_applies_them() {
    let mut block = Vec::new();
    Encoder::size_update(&mut block, 0);
    assert_eq!(block, [0x20]);
    let mut block = Vec::new();
    Encoder::size_update(&mut block, 4096);
    assert_eq!(block, [0x3f, 0xe1, 0x1f]);
    let mut d = Decoder::new(4096);
    assert_eq!(decode(&mut d, &block), Ok(vec![]));
}

// The fuzz check itself, on inputs made of the Appendix C blocks.

#[test]
fn the_fuzz_check_passes_on_the_appendix_c_blocks_at_every_limit() {
    let c3 =
        hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d 8286 84be 5808 6e6f 2d63 6163 6865");
    let c6 = hex(
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3 4883 640e ffc1 c0bf",
    );
    for sel in 0..16u8 {
        for (blocks, cut) in [(&c3, 20u8), (&c6, 54)] {
            let mut input = vec![sel, cut];
            input.extend_from_slice(blocks);
            super::fuzzing::fuzz_check(&input);
        }
    }
}

#[test]
fn the_committed_hpack_fuzz_inputs_replay_without_a_broken_property() {
    // The same replay as stoa-server's tests/fuzz_corpus.rs, for this
    // target only, so that `cargo test -p stoa-h2` guards it too.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut replayed = 0;
    for dir in ["corpus", "seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join("hpack")) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("directory entry").path();
            let data = std::fs::read(&path).expect("readable fuzz input");
            super::fuzzing::fuzz_check(&data);
            replayed += 1;
        }
    }
    assert!(
        replayed > 0,
        "fuzz/corpus/hpack and fuzz/seeds/hpack are empty"
    );
}
