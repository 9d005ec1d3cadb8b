//! Frames, SETTINGS, stream types and request checks on byte vectors,
//! each case citing the RFC 9114 rule it follows.

use stoa_h3::qpack::{Decoded, Decoder, Encoder, Fields};
use stoa_h3::{
    check_trailers, frame, response_status, BodyLength, Code, Control, ControlReader, Event,
    Request, RequestReader, Scope, Settings, UniKind, UniStreams,
};

fn headers_frame(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut section = Vec::new();
    Encoder::prefix(&mut section);
    for (n, v) in fields {
        Encoder::field(&mut section, n, v);
    }
    let mut out = Vec::new();
    frame::put_frame(&mut out, frame::HEADERS, &section);
    out
}

/// Every event of `wire` through a server reader, or its error.
fn read_all(wire: &[u8]) -> Result<Vec<Event>, stoa_h3::Error> {
    let mut r = RequestReader::server(1 << 14);
    let mut pos = 0;
    let mut events = Vec::new();
    loop {
        let step = r.next(&wire[pos..])?;
        if let Some(e) = step.event {
            let shift = |x: std::ops::Range<usize>| x.start + pos..x.end + pos;
            events.push(match e {
                Event::Headers(x) => Event::Headers(shift(x)),
                Event::Data(x) => Event::Data(shift(x)),
                Event::Trailers(x) => Event::Trailers(shift(x)),
            });
        } else if step.used == 0 {
            r.finish(wire.len() - pos)?;
            return Ok(events);
        }
        pos += step.used;
    }
}

fn code(r: Result<Vec<Event>, stoa_h3::Error>) -> Option<(Code, Scope)> {
    r.err().map(|e| (e.code, e.scope))
}

const GET: &[(&[u8], &[u8])] = &[
    (b":method", b"GET"),
    (b":scheme", b"https"),
    (b":authority", b"a.test"),
    (b":path", b"/"),
];

#[test]
fn rfc9114_4_1_headers_data_and_trailers_are_read_in_order_and_unknown_frames_skipped() {
    let mut wire = headers_frame(GET);
    // A reserved type (0x21 + 0x1f) with a payload: skipped.
    frame::put_frame(&mut wire, 0x40, b"grease");
    frame::put_frame(&mut wire, frame::DATA, b"hello");
    frame::put_frame(&mut wire, frame::DATA, b"");
    wire.extend(headers_frame(&[(b"x-check", b"1")]));
    let events = read_all(&wire).expect("a valid stream");
    // The empty DATA frame gives no event.
    assert_eq!(events.len(), 3);
    assert!(matches!(events[0], Event::Headers(_)));
    let Event::Data(ref d) = events[1] else {
        panic!("DATA")
    };
    assert_eq!(&wire[d.clone()], b"hello");
    assert!(matches!(events[2], Event::Trailers(_)));
    assert!(frame::is_reserved(0x21) && frame::is_reserved(0x40) && !frame::is_reserved(0x22));
}

#[test]
fn a_data_payload_arriving_in_pieces_is_handed_out_as_it_comes() {
    let mut wire = headers_frame(GET);
    let at = wire.len();
    frame::put_frame(&mut wire, frame::DATA, b"abcdef");
    let mut r = RequestReader::server(1 << 14);
    let s = r.next(&wire[..at]).expect("ok");
    assert!(matches!(s.event, Some(Event::Headers(_))));
    let s = r.next(&wire[at..at + 4]).expect("ok"); // header + "ab"
    assert_eq!((s.used, s.event), (2, None));
    let s = r.next(&wire[at + 2..at + 4]).expect("ok");
    assert_eq!(s.event, Some(Event::Data(0..2)));
    // The stream ends inside the frame: H3_FRAME_ERROR (§7.1).
    let e = r.finish(0).expect_err("cut");
    assert_eq!(e.code, Code::FrameError);
}

#[test]
fn rfc9114_frame_errors_on_request_streams() {
    let data_first = {
        let mut w = Vec::new();
        frame::put_frame(&mut w, frame::DATA, b"x");
        w
    };
    assert_eq!(
        code(read_all(&data_first)),
        Some((Code::FrameUnexpected, Scope::Connection))
    );
    for ty in [
        frame::SETTINGS,
        frame::GOAWAY,
        frame::MAX_PUSH_ID,
        frame::CANCEL_PUSH,
        // §7.2.5: a client never sends PUSH_PROMISE.
        frame::PUSH_PROMISE,
        // §7.2.8: HTTP/2's PRIORITY, PING, WINDOW_UPDATE, CONTINUATION.
        0x02,
        0x06,
        0x08,
        0x09,
    ] {
        let mut w = headers_frame(GET);
        frame::put_frame(&mut w, ty, &[0]);
        assert_eq!(
            code(read_all(&w)),
            Some((Code::FrameUnexpected, Scope::Connection)),
            "type {ty:#x}"
        );
    }
    // Anything after trailers.
    let mut w = headers_frame(GET);
    w.extend(headers_frame(&[(b"x", b"1")]));
    frame::put_frame(&mut w, frame::DATA, b"x");
    assert_eq!(
        code(read_all(&w)),
        Some((Code::FrameUnexpected, Scope::Connection))
    );
    // §4.1: a stream ended with no HEADERS.
    assert_eq!(
        code(read_all(&[])),
        Some((Code::RequestIncomplete, Scope::Stream))
    );
    // A HEADERS frame larger than the limit announced.
    let mut w = Vec::new();
    frame::put_header(&mut w, frame::HEADERS, 1 << 15);
    assert_eq!(
        code(read_all(&w)),
        Some((Code::ExcessiveLoad, Scope::Stream))
    );
    // §7.2.5 from the client's side: PUSH_PROMISE though we never sent
    // MAX_PUSH_ID.
    let mut r = RequestReader::client(1 << 14);
    let mut w = Vec::new();
    frame::put_frame(&mut w, frame::PUSH_PROMISE, &[0, 0, 0]);
    assert_eq!(r.next(&w).map_err(|e| e.code), Err(Code::IdError));
}

#[test]
fn rfc9114_7_2_4_settings_parse_and_refuse_duplicates_and_http2_ids() {
    let ours = Settings {
        qpack_max_table_capacity: 4096,
        max_field_section_size: Some(16384),
        qpack_blocked_streams: 16,
    };
    let mut w = Vec::new();
    ours.put_frame(&mut w);
    let mut r = ControlReader::new(true);
    let step = r.next(&w).expect("valid SETTINGS");
    assert_eq!(step.used, w.len());
    assert_eq!(step.event, Some(Control::Settings(ours)));
    // Unknown and reserved ids are ignored.
    assert_eq!(Settings::parse(&[0x21, 0x05]), Ok(Settings::default()));
    for bad in [&[0x01, 0x00, 0x01, 0x00][..], &[0x21, 0, 0x21, 0]] {
        assert_eq!(
            Settings::parse(bad).map_err(|e| e.code),
            Err(Code::SettingsError)
        );
    }
    for id in 0x02..=0x05u8 {
        assert_eq!(
            Settings::parse(&[id, 0]).map_err(|e| e.code),
            Err(Code::SettingsError),
            "id {id}"
        );
    }
    assert_eq!(
        Settings::parse(&[0x01]).map_err(|e| e.code),
        Err(Code::FrameError)
    );
}

#[test]
fn rfc9114_6_2_1_the_control_stream_starts_with_one_settings() {
    let mut settings = Vec::new();
    Settings::default().put_frame(&mut settings);
    let mut goaway = Vec::new();
    frame::put_goaway(&mut goaway, 8);

    let mut r = ControlReader::new(true);
    assert_eq!(
        r.next(&goaway).map_err(|e| e.code),
        Err(Code::MissingSettings)
    );

    let mut r = ControlReader::new(true);
    r.next(&settings).expect("SETTINGS");
    let s = r.next(&goaway).expect("GOAWAY");
    assert_eq!(s.event, Some(Control::Goaway(8)));
    assert_eq!(
        r.next(&settings).map_err(|e| e.code),
        Err(Code::FrameUnexpected)
    );
    for ty in [frame::DATA, frame::HEADERS, frame::PUSH_PROMISE, 0x06] {
        let mut w = Vec::new();
        frame::put_frame(&mut w, ty, &[0]);
        assert_eq!(r.next(&w).map_err(|e| e.code), Err(Code::FrameUnexpected));
    }
    // A GOAWAY whose payload is not one varint.
    let mut w = Vec::new();
    frame::put_frame(&mut w, frame::GOAWAY, &[8, 0]);
    assert_eq!(r.next(&w).map_err(|e| e.code), Err(Code::FrameError));
    // MAX_PUSH_ID from a server (read by a client).
    let mut c = ControlReader::new(false);
    c.next(&settings).expect("SETTINGS");
    let mut w = Vec::new();
    frame::put_frame(&mut w, frame::MAX_PUSH_ID, &[1]);
    assert_eq!(c.next(&w).map_err(|e| e.code), Err(Code::FrameUnexpected));
    // An unknown frame is skipped even when large.
    let mut w = Vec::new();
    frame::put_header(&mut w, 0x21, 100_000);
    let s = r.next(&w).expect("skipped");
    assert_eq!(s.used, w.len());
    let s = r.next(&[0; 500]).expect("skipped");
    assert_eq!(s.used, 500);
}

#[test]
fn rfc9114_6_2_unidirectional_stream_types() {
    let mut u = UniStreams::default();
    assert_eq!(u.open(0x00, true), Ok(UniKind::Control));
    assert_eq!(u.open(0x02, true), Ok(UniKind::QpackEncoder));
    assert_eq!(u.open(0x03, true), Ok(UniKind::QpackDecoder));
    assert_eq!(u.open(0x21, true), Ok(UniKind::Other(0x21)));
    for dup in [0x00, 0x02, 0x03] {
        assert_eq!(
            u.open(dup, true).map_err(|e| e.code),
            Err(Code::StreamCreationError)
        );
    }
    // §6.2.2: only servers push.
    assert_eq!(
        UniStreams::default().open(0x01, true).map_err(|e| e.code),
        Err(Code::StreamCreationError)
    );
    assert_eq!(UniStreams::default().open(0x01, false), Ok(UniKind::Push));
}

type Lines<'a> = Vec<(&'a [u8], &'a [u8])>;

fn request(fields: &[(&[u8], &[u8])]) -> Result<Request, Code> {
    let mut f = Fields::new();
    for (n, v) in fields {
        f.push(n, v);
    }
    Request::from_fields(f).map_err(|e| {
        assert_eq!(e.scope, Scope::Stream);
        e.code
    })
}

#[test]
fn rfc9114_4_3_1_a_valid_request_exposes_its_pseudo_headers_and_fields() {
    let mut fields = GET.to_vec();
    fields.push((b"content-length", b"5"));
    fields.push((b"te", b"trailers"));
    let r = request(&fields).expect("valid");
    assert_eq!(r.method(), b"GET");
    assert_eq!(r.scheme(), Some(&b"https"[..]));
    assert_eq!(r.authority(), Some(&b"a.test"[..]));
    assert_eq!(r.path(), Some(&b"/"[..]));
    assert_eq!(r.content_length(), Some(5));
    assert_eq!(r.fields().count(), 2);
    // CONNECT: :authority only.
    request(&[(b":method", b"CONNECT"), (b":authority", b"a:443")]).expect("CONNECT");
    // host instead of :authority.
    request(&[
        (b":method", b"GET"),
        (b":scheme", b"https"),
        (b":path", b"/"),
        (b"host", b"a.test"),
    ])
    .expect("host");
}

#[test]
fn rfc9114_4_1_2_malformed_requests_are_message_errors() {
    let m: &[(&[u8], &[u8])] = &[(b":method", b"GET")];
    let cases: Vec<(&str, Lines)> = vec![
        ("no :method", GET[1..].to_vec()),
        ("no :scheme", vec![GET[0], GET[2], GET[3]]),
        ("no :path", GET[..3].to_vec()),
        (
            "empty :path",
            [
                m,
                &[
                    (b":scheme", b"https"),
                    (b":authority", b"a"),
                    (b":path", b""),
                ],
            ]
            .concat(),
        ),
        ("no authority", vec![GET[0], GET[1], GET[3]]),
        ("twice", [GET, &[(b":path", b"/x")]].concat()),
        (
            "pseudo after regular",
            [&GET[..3], &[(b"x", b"1"), (b":path", b"/")]].concat(),
        ),
        ("unknown pseudo", [GET, &[(b":foo", b"1")]].concat()),
        ("response pseudo", [GET, &[(b":status", b"200")]].concat()),
        ("uppercase", [GET, &[(b"X-Up", b"1")]].concat()),
        ("connection", [GET, &[(b"connection", b"close")]].concat()),
        (
            "transfer-encoding",
            [GET, &[(b"transfer-encoding", b"chunked")]].concat(),
        ),
        ("te", [GET, &[(b"te", b"gzip")]].concat()),
        ("crlf", [GET, &[(b"x", b"a\r\nb")]].concat()),
        ("length", [GET, &[(b"content-length", b"1x")]].concat()),
        (
            "lengths",
            [GET, &[(b"content-length", b"1"), (b"content-length", b"2")]].concat(),
        ),
        ("host differs", [GET, &[(b"host", b"b.test")]].concat()),
        (
            "CONNECT with path",
            vec![
                (b":method", b"CONNECT"),
                (b":authority", b"a"),
                (b":path", b"/"),
            ],
        ),
    ];
    for (why, fields) in cases {
        assert_eq!(request(&fields).err(), Some(Code::MessageError), "{why}");
    }
}

#[test]
fn rfc9114_4_1_2_content_length_must_match_the_data() {
    let mut b = BodyLength::new(Some(5));
    b.data(3).expect("ok");
    assert_eq!(b.end().map_err(|e| e.code), Err(Code::MessageError));
    b.data(2).expect("ok");
    b.end().expect("exact");
    assert_eq!(b.data(1).map_err(|e| e.code), Err(Code::MessageError));
    let mut open = BodyLength::new(None);
    open.data(1 << 20).expect("no length: any");
    open.end().expect("ok");
}

#[test]
fn rfc9114_4_3_2_responses_and_trailers_are_checked() {
    let mut f = Fields::new();
    f.push(b":status", b"204");
    f.push(b"server", b"x");
    assert_eq!(response_status(&f), Ok(204));
    let mut bad = Fields::new();
    bad.push(b":status", b"20");
    assert!(response_status(&bad).is_err());
    let mut t = Fields::new();
    t.push(b"x-sum", b"1");
    check_trailers(&t).expect("plain trailers");
    t.push(b":path", b"/");
    assert!(check_trailers(&t).is_err());
}

#[test]
fn a_client_round_trip_encodes_a_request_and_decodes_a_response() {
    let mut section = Vec::new();
    Encoder::prefix(&mut section);
    Encoder::request(&mut section, b"GET", b"https", b"a.test", b"/x");
    let mut server_side = Decoder::new(4096, 16);
    let mut f = Fields::new();
    assert_eq!(
        server_side.decode(0, &section, 1 << 14, &mut f),
        Ok(Decoded::Done)
    );
    let req = Request::from_fields(f).expect("valid");
    assert_eq!(req.path(), Some(&b"/x"[..]));

    let mut resp = Vec::new();
    Encoder::prefix(&mut resp);
    Encoder::status(&mut resp, 200);
    Encoder::field(&mut resp, b"content-length", b"3");
    let mut wire = Vec::new();
    frame::put_frame(&mut wire, frame::HEADERS, &resp);
    frame::put_frame(&mut wire, frame::DATA, b"abc");
    let mut r = RequestReader::client(1 << 14);
    let s = r.next(&wire).expect("ok");
    let Some(Event::Headers(h)) = s.event else {
        panic!("HEADERS")
    };
    let mut client_side = Decoder::new(0, 0);
    let mut f = Fields::new();
    client_side
        .decode(0, &wire[h], 1 << 14, &mut f)
        .expect("decoded");
    assert_eq!(response_status(&f), Ok(200));
}
