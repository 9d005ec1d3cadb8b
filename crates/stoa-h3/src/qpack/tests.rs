//! QPACK on byte vectors: RFC 9204 Appendix B's examples, then each
//! error case of §2.2, §4.3, §4.4 and §4.5.

use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn decoded(fields: &Fields) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(n, v)| {
            (
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn rfc9204_b_1_literal_field_line_with_name_reference() {
    let mut dec = Decoder::new(0, 0);
    let mut f = Fields::new();
    let section = hex("0000 510b 2f69 6e64 6578 2e68 746d 6c");
    assert_eq!(dec.decode(0, &section, 1 << 16, &mut f), Ok(Decoded::Done));
    assert_eq!(decoded(&f), pairs(&[(":path", "/index.html")]));
    // No Required Insert Count: nothing to acknowledge.
    assert!(dec.output().is_empty());
}

/// B.2 to B.5 on one connection, as the appendix runs them.
#[test]
fn rfc9204_b_2_to_b_5_dynamic_table_inserts_duplicates_and_eviction() {
    let mut dec = Decoder::new(220, 1);
    let mut f = Fields::new();
    // B.2: capacity 220, two inserts by static name reference.
    dec.feed_encoder(&hex(
        "3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468",
    ))
    .expect("valid encoder stream");
    assert_eq!(dec.capacity(), 220);
    assert_eq!(dec.table_size(), 106);
    // The appendix's decoder lets the Section Acknowledgment say the
    // inserts arrived; ours also sends an Insert Count Increment of 2 at
    // once (§4.4.3 leaves the timing to the decoder).
    assert_eq!(std::mem::take(dec.output()), hex("02"));
    assert_eq!(
        dec.decode(4, &hex("0381 10 11"), 1 << 16, &mut f),
        Ok(Decoded::Done)
    );
    assert_eq!(
        decoded(&f),
        pairs(&[(":authority", "www.example.com"), (":path", "/sample/path")])
    );
    assert_eq!(std::mem::take(dec.output()), hex("84"));

    // B.3: Insert With Literal Name; the decoder's Insert Count Increment.
    dec.feed_encoder(&hex(
        "4a63 7573 746f 6d2d 6b65 790c 6375 7374 6f6d 2d76 616c 7565",
    ))
    .expect("valid encoder stream");
    assert_eq!(dec.table_size(), 160);
    assert_eq!(std::mem::take(dec.output()), hex("01"));

    // B.4: Duplicate, then a section using it with Base 4.
    dec.feed_encoder(&hex("02")).expect("valid encoder stream");
    assert_eq!(dec.table_size(), 217);
    assert_eq!(std::mem::take(dec.output()), hex("01"));
    assert_eq!(
        dec.decode(8, &hex("0500 80 c1 81"), 1 << 16, &mut f),
        Ok(Decoded::Done)
    );
    assert_eq!(
        decoded(&f),
        pairs(&[
            (":authority", "www.example.com"),
            (":path", "/"),
            ("custom-key", "custom-value"),
        ])
    );
    assert_eq!(std::mem::take(dec.output()), hex("88"));
    // The stream is then reset: a Stream Cancellation for stream 8.
    dec.cancel_stream(8);
    assert_eq!(std::mem::take(dec.output()), hex("48"));

    // B.5: Insert With Name Reference (dynamic, relative 1) evicts the
    // oldest entry.
    dec.feed_encoder(&hex("810d 6375 7374 6f6d 2d76 616c 7565 32"))
        .expect("valid encoder stream");
    assert_eq!(dec.table_size(), 215);
    assert_eq!(dec.insert_count(), 5);
    let table: Vec<(Vec<u8>, Vec<u8>)> = dec
        .entries()
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect();
    assert_eq!(
        table,
        [
            (b":path".to_vec(), b"/sample/path".to_vec()),
            (b"custom-key".to_vec(), b"custom-value".to_vec()),
            (b":authority".to_vec(), b"www.example.com".to_vec()),
            (b"custom-key".to_vec(), b"custom-value2".to_vec()),
        ]
    );
    assert_eq!(std::mem::take(dec.output()), hex("01"));
}

#[test]
fn encoder_instructions_split_anywhere_give_the_same_table() {
    let stream = hex(
        "3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468 \
         4a63 7573 746f 6d2d 6b65 790c 6375 7374 6f6d 2d76 616c 7565 02",
    );
    let mut whole = Decoder::new(220, 0);
    whole.feed_encoder(&stream).expect("valid");
    for cut in 0..=stream.len() {
        let mut d = Decoder::new(220, 0);
        d.feed_encoder(&stream[..cut]).expect("valid");
        d.feed_encoder(&stream[cut..]).expect("valid");
        assert!(d.entries().eq(whole.entries()), "cut at {cut}");
    }
}

#[test]
fn rfc9204_2_1_2_a_section_waits_for_its_inserts_then_decodes() {
    let mut dec = Decoder::new(220, 1);
    let mut f = Fields::new();
    dec.feed_encoder(&hex("3fbd01")).expect("valid");
    // Required Insert Count 2 before any insert: blocked.
    assert_eq!(
        dec.decode(4, &hex("0381 10 11"), 1 << 16, &mut f),
        Ok(Decoded::Blocked)
    );
    assert!(dec.is_blocked(4));
    // A second blocked stream is one more than QPACK_BLOCKED_STREAMS = 1.
    assert_eq!(
        dec.decode(8, &hex("0381 10 11"), 1 << 16, &mut f),
        Err(QpackError::Decompression(
            "more blocked streams than allowed"
        ))
    );
    dec.feed_encoder(&hex(
        "c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468",
    ))
    .expect("valid");
    assert!(!dec.is_blocked(4));
    assert_eq!(dec.unblocked().collect::<Vec<_>>(), [4]);
    assert_eq!(
        dec.decode(4, &hex("0381 10 11"), 1 << 16, &mut f),
        Ok(Decoded::Done)
    );
    assert_eq!(dec.blocked_streams(), 0);
    assert_eq!(f.len(), 2);
}

#[test]
fn rfc9204_2_1_2_no_blocked_streams_allowed_by_default() {
    let mut dec = Decoder::new(220, 0);
    let mut f = Fields::new();
    assert!(matches!(
        dec.decode(0, &hex("0281 10"), 1 << 16, &mut f),
        Err(QpackError::Decompression(_))
    ));
}

#[test]
fn rfc9204_4_3_1_a_capacity_above_ours_is_an_encoder_stream_error() {
    let mut dec = Decoder::new(100, 0);
    // 3fbd01 sets 220.
    assert!(matches!(
        dec.feed_encoder(&hex("3fbd01")),
        Err(QpackError::EncoderStream(_))
    ));
}

#[test]
fn rfc9204_3_2_2_an_entry_larger_than_the_capacity_is_an_encoder_stream_error() {
    let mut dec = Decoder::new(4096, 0);
    // Capacity 40; an entry of 10 + 15 + 32 = 57.
    let mut s = hex("3f09");
    s.extend(hex("c00f 7777 772e 6578 616d 706c 652e 636f 6d"));
    assert!(matches!(
        dec.feed_encoder(&s),
        Err(QpackError::EncoderStream(_))
    ));
}

#[test]
fn rfc9204_3_2_4_relative_indices_past_the_table_are_encoder_stream_errors() {
    for bad in ["3fbd01 00", "3fbd01 800161"] {
        let mut dec = Decoder::new(220, 0);
        assert!(
            matches!(
                dec.feed_encoder(&hex(bad)),
                Err(QpackError::EncoderStream(_))
            ),
            "{bad}"
        );
    }
    // A static index past the 99 entries.
    let mut dec = Decoder::new(220, 0);
    assert!(matches!(
        dec.feed_encoder(&hex("3fbd01 ff2401 61")),
        Err(QpackError::EncoderStream(_))
    ));
}

#[test]
fn rfc9204_4_5_1_1_required_insert_count_out_of_range_fails() {
    let mut dec = Decoder::new(220, 4);
    let mut f = Fields::new();
    // MaxEntries 6, FullRange 12: 13 is past it.
    assert!(matches!(
        dec.decode(0, &hex("0d00"), 1 << 16, &mut f),
        Err(QpackError::Decompression(_))
    ));
    // Any nonzero encoding with a table capacity of 0.
    let mut dec = Decoder::new(0, 4);
    assert!(matches!(
        dec.decode(0, &hex("0100"), 1 << 16, &mut f),
        Err(QpackError::Decompression(_))
    ));
}

#[test]
fn rfc9204_4_5_1_1_required_insert_count_wraps_around() {
    // After 13 inserts of a 38-byte entry into a table of 6 entries'
    // room, Required Insert Count 13 encodes as 13 % 12 + 1 = 2.
    let mut dec = Decoder::new(220, 0);
    let mut f = Fields::new();
    dec.feed_encoder(&hex("3fbd01")).expect("valid");
    for _ in 0..13 {
        dec.feed_encoder(&hex("c201 61")).expect("valid"); // age: a
    }
    assert_eq!(dec.insert_count(), 13);
    // Base 13, indexed dynamic relative 0 = absolute 12.
    assert_eq!(
        dec.decode(0, &hex("0200 80"), 1 << 16, &mut f),
        Ok(Decoded::Done)
    );
    assert_eq!(decoded(&f), pairs(&[("age", "a")]));
}

#[test]
fn rfc9204_2_2_3_references_past_the_base_or_evicted_or_unneeded_fail() {
    let setup = || {
        let mut dec = Decoder::new(220, 0);
        dec.feed_encoder(&hex(
            "3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468",
        ))
        .expect("valid");
        dec
    };
    let mut f = Fields::new();
    for (bad, why) in [
        // Base 2, relative index 2: absolute -1.
        ("0300 82", "below zero"),
        // Base 0, post-base index 2: absolute 2 >= RIC 2.
        ("0381 12", "past RIC"),
        // RIC 2, but only entry 0 referenced.
        ("0381 10", "RIC larger than needed"),
        // Sign bit with Delta Base >= RIC: a negative base.
        ("0382 10", "negative base"),
        // Static index 99.
        ("0000 ff24", "static past the table"),
        // A literal cut short.
        ("0000 510b 2f69", "cut short"),
    ] {
        let mut dec = setup();
        assert!(
            matches!(
                dec.decode(0, &hex(bad), 1 << 16, &mut f),
                Err(QpackError::Decompression(_))
            ),
            "{why}"
        );
    }
    // Evicted: fill past the capacity so that entry 0 goes, then refer
    // to it.
    let mut dec = setup();
    dec.feed_encoder(&hex(
        "4a63 7573 746f 6d2d 6b65 790c 6375 7374 6f6d 2d76 616c 7565 02",
    ))
    .expect("valid");
    dec.feed_encoder(&hex("810d 6375 7374 6f6d 2d76 616c 7565 32"))
        .expect("valid");
    // RIC 5 (encoded 6), Base 5; relative 4 = absolute 0, evicted; and
    // relative 0 = absolute 4 to make RIC exact.
    assert!(matches!(
        dec.decode(0, &hex("0600 84 80"), 1 << 16, &mut f),
        Err(QpackError::Decompression(_))
    ));
}

#[test]
fn a_section_past_the_size_limit_is_refused_but_acknowledged() {
    let mut dec = Decoder::new(0, 0);
    let mut f = Fields::new();
    let section = hex("0000 510b 2f69 6e64 6578 2e68 746d 6c");
    // :path (5) + /index.html (11) + 32 = 48.
    assert_eq!(
        dec.decode(0, &section, 47, &mut f),
        Err(QpackError::TooLarge)
    );
    assert_eq!(dec.decode(0, &section, 48, &mut f), Ok(Decoded::Done));
}

#[test]
fn rfc9204_4_4_a_peer_acknowledging_inserts_we_never_made_is_an_error() {
    // Stream Cancellation for stream 4: fine.
    assert_eq!(read_decoder_stream(&hex("44")), Ok(1));
    // A partial one is left for later.
    assert_eq!(read_decoder_stream(&hex("44 7f")), Ok(1));
    for bad in ["84", "01", "00"] {
        assert!(
            matches!(
                read_decoder_stream(&hex(bad)),
                Err(QpackError::DecoderStream(_))
            ),
            "{bad}"
        );
    }
}

#[test]
fn huffman_strings_decode_through_stoa_h2s_coder() {
    // RFC 7541 C.4.1's "www.example.com", Huffman-coded, as the value of
    // :authority by static name reference.
    let mut dec = Decoder::new(0, 0);
    let mut f = Fields::new();
    let section = hex("0000 508c f1e3 c2e5 f23a 6ba0 ab90 f4ff");
    assert_eq!(dec.decode(0, &section, 1 << 16, &mut f), Ok(Decoded::Done));
    assert_eq!(decoded(&f), pairs(&[(":authority", "www.example.com")]));
    // EOS inside a string fails.
    let bad = hex("0000 5084 ffff ffff");
    assert!(matches!(
        dec.decode(0, &bad, 1 << 16, &mut f),
        Err(QpackError::Decompression(_))
    ));
}

#[test]
fn the_encoder_indexes_static_entries_and_huffman_codes_only_when_shorter() {
    let mut out = Vec::new();
    Encoder::prefix(&mut out);
    Encoder::status(&mut out, 200);
    Encoder::status(&mut out, 500);
    Encoder::status(&mut out, 201);
    Encoder::field(&mut out, b"content-type", b"text/plain");
    Encoder::field(&mut out, b"content-length", b"1358");
    Encoder::field(&mut out, b"x-odd", b"%%%%");
    // 200 is static 25 (0xd9); 500 is static 71 (0xff 0x08: 6-bit
    // prefix); 201 a literal with :status's name (24: 0x5f 0x09).
    assert_eq!(&out[..2], &[0, 0]);
    assert_eq!(&out[2..5], &[0xd9, 0xff, 0x08]);
    assert_eq!(&out[5..7], &[0x5f, 0x09]);
    let mut dec = Decoder::new(0, 0);
    let mut f = Fields::new();
    assert_eq!(dec.decode(0, &out, 1 << 16, &mut f), Ok(Decoded::Done));
    assert_eq!(
        decoded(&f),
        pairs(&[
            (":status", "200"),
            (":status", "500"),
            (":status", "201"),
            ("content-type", "text/plain"),
            ("content-length", "1358"),
            ("x-odd", "%%%%"),
        ])
    );
    // "%%%%" Huffman-codes to 24 bits... (6 bits each): 3 bytes < 4, so
    // Huffman; "x-odd" (5 bytes) codes to 4 bytes: Huffman too.
    let tail = &out[out.len() - 4..];
    assert_eq!(tail.len(), 4);
}

#[test]
fn the_fuzz_check_passes_on_the_appendix_b_streams() {
    let enc =
        hex("3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468");
    for sel in 0..=255u8 {
        let mut input = vec![sel, enc.len() as u8];
        input.extend_from_slice(&enc);
        input.extend(hex("0381 10 11"));
        fuzzing::fuzz_check(&input);
    }
    for seed in 0..2000 {
        fuzzing::fuzz_check(&fuzzing::generate(seed));
    }
}
