//! The properties a fuzz target checks (see [`fuzz_check`]). Not API.

use crate::app;
use crate::gateway;
use crate::nv::{self, PairDecoder};
use crate::record::{Decoder, HEADER_LEN, MAX_CONTENT_LEN};
use crate::Error;

/// The limit the pair check uses, small enough for the fuzzer to reach.
const PAIR_LIMIT: usize = 4096;

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Input layout: 2 bytes (u16 little-endian) choose the split point, modulo
/// the length of the rest, which is the wire bytes. Panics when a property
/// breaks:
///
/// - the record decoder gives the same records and the same error whether
///   the input comes whole, in two pieces or byte by byte; every call
///   consumes at most its input and at least one byte, and nothing more
///   than one record is buffered;
/// - each record re-encodes to bytes that decode to the same record;
/// - the pair decoder gives the same pairs and result for both splits,
///   never holds more than its limit, agrees with whole-buffer parsing, and
///   its pairs re-encode and parse back the same;
/// - the gateway and application state machines take the bytes (split
///   the same way) without panicking.
pub fn fuzz_check(data: &[u8]) {
    let (cut, wire) = match data {
        [a, b, rest @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), rest),
        _ => (0, &[][..]),
    };
    let cut = cut % (wire.len() + 1);
    let (a, b) = wire.split_at(cut);

    let whole = records(&[wire]);
    assert_eq!(
        records(&[a, b]),
        whole,
        "records differ when split at {cut}"
    );
    if wire.len() <= 4096 {
        let bytes: Vec<&[u8]> = wire.chunks(1).collect();
        assert_eq!(records(&bytes), whole, "records differ byte by byte");
    }
    for rec in &whole.0 {
        let mut d = Decoder::new();
        let (n, again) = d.decode(rec).expect("a re-encoded record decodes");
        assert_eq!(n, rec.len(), "a re-encoded record is one record");
        let mut re = Vec::new();
        again
            .expect("a re-encoded record is complete")
            .encode(&mut re)
            .expect("a decoded record encodes");
        assert_eq!(&re, rec, "records round-trip");
        assert_eq!(re.len() % 8, 0, "encoded records are 8-byte aligned");
    }

    let pairs_whole = pairs(&[wire]);
    assert_eq!(
        pairs(&[a, b]),
        pairs_whole,
        "pairs differ when split at {cut}"
    );
    if wire.len() <= PAIR_LIMIT {
        match (nv::parse_pairs(wire), &pairs_whole) {
            (Ok(p), Ok(q)) => {
                let owned: Pairs = p.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
                assert_eq!(&owned, q, "stream and buffer parsing agree");
            }
            // A pair announced past the limit is refused from its lengths,
            // before the stream ends inside it.
            (Err(Error::BadPairs), Err(Error::BadPairs | Error::TooLarge)) => {}
            (x, y) => panic!("stream and buffer parsing disagree: {x:?} vs {y:?}"),
        }
    }
    if let Ok(p) = &pairs_whole {
        let mut enc = Vec::new();
        for (n, v) in p {
            nv::push_pair(&mut enc, n, v).expect("short pairs encode");
        }
        let back: Pairs = nv::parse_pairs(&enc)
            .expect("encoded pairs parse")
            .iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(&back, p, "pairs round-trip");
    }

    // The state machines: no panic, whatever arrives.
    let mut g = gateway::Connection::new();
    g.set_max_concurrent(4);
    let mut out = Vec::new();
    let p: [(&str, &str); 0] = [];
    for _ in 0..4 {
        let _ = g.start_request(crate::Role::Responder, true, p, &mut out);
    }
    for piece in [a, b] {
        let _ = g.feed(piece);
        while g.poll_event().is_some() {}
    }
    let _ = g.eof();
    let mut app = app::Connection::new(app::Settings {
        max_params: PAIR_LIMIT,
        max_stdin: 1 << 16,
        roles: vec![
            crate::Role::Responder,
            crate::Role::Authorizer,
            crate::Role::Filter,
        ],
        ..app::Settings::default()
    });
    for piece in [a, b] {
        out.clear();
        let _ = app.feed(piece, &mut out);
        while let Some(ev) = app.poll_event() {
            if let app::AppEvent::Request(r) = ev {
                app.end_request(r.id, 0, &mut out);
            }
        }
        assert!(
            records(&[&out]).1.is_ok(),
            "the application writes valid records"
        );
    }
}

/// Decodes `pieces` in turn: each record re-encoded, and how it ended.
fn records(pieces: &[&[u8]]) -> (Vec<Vec<u8>>, Result<(), Error>) {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    for piece in pieces {
        let mut pos = 0;
        while pos < piece.len() {
            match d.decode(&piece[pos..]) {
                Ok((n, rec)) => {
                    assert!(n > 0, "the decoder makes progress");
                    assert!(
                        n <= piece.len() - pos,
                        "the decoder consumes only its input"
                    );
                    pos += n;
                    if let Some(r) = rec {
                        let mut e = Vec::new();
                        r.encode(&mut e).expect("a decoded record encodes");
                        out.push(e);
                    }
                }
                Err(e) => return (out, Err(e)),
            }
            assert!(
                d.buffered() <= HEADER_LEN + MAX_CONTENT_LEN,
                "the decoder holds at most one record"
            );
        }
    }
    let end = d.finish();
    (out, end)
}

/// Runs `pieces` through a pair decoder.
fn pairs(pieces: &[&[u8]]) -> Result<Pairs, Error> {
    let mut d = PairDecoder::new(PAIR_LIMIT);
    let mut got = Vec::new();
    for piece in pieces {
        d.feed(piece, |n, v| got.push((n.to_vec(), v.to_vec())))?;
        assert!(
            d.buffered() <= PAIR_LIMIT,
            "the pair decoder respects its limit"
        );
    }
    d.finish()?;
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{self, RecordType, Role};

    /// A deterministic generator, so the check runs on varied input in
    /// `cargo test` without a fuzzer.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn the_fuzz_check_holds_on_valid_and_mangled_conversations() {
        let mut wire = Vec::new();
        record::push_begin_request(&mut wire, 1, Role::Responder, true);
        nv::push_params(&mut wire, 1, [("SCRIPT_NAME", "/x"), ("Q", "1")]).unwrap();
        record::push_stream(&mut wire, RecordType::Stdin, 1, b"body");
        record::push_stream_end(&mut wire, RecordType::Stdin, 1);
        record::push_get_values(&mut wire, ["FCGI_MAX_CONNS"]).unwrap();
        record::push_stream(&mut wire, RecordType::Stdout, 1, b"Status: 200\r\n\r\n");
        record::push_end_request(&mut wire, 1, 0, record::ProtocolStatus::RequestComplete);
        for cut in 0..=wire.len() as u16 {
            let mut input = cut.to_le_bytes().to_vec();
            input.extend_from_slice(&wire);
            fuzz_check(&input);
        }
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut input = wire.clone();
            for _ in 0..(xorshift(&mut s) % 4) {
                let i = (xorshift(&mut s) as usize) % input.len();
                input[i] = xorshift(&mut s) as u8;
            }
            let len = (xorshift(&mut s) as usize) % (input.len() + 1);
            input.truncate(len);
            fuzz_check(&input);
        }
        fuzz_check(b"");
        fuzz_check(b"\x01");
        fuzz_check(&[0xff; 300]);
    }
}
