//! The connection on byte vectors: frames in, events and frames out.
//! Header blocks are written by hand (RFC 7541 static table, literals
//! without Huffman), so these tests need no encoder.

use bytes::BytesMut;
use stoa_h2::frame::{self, Head};
use stoa_h2::{Config, Conn, Event, Reason, OUTPUT_HIGH};

const DATA: u8 = frame::DATA;
const HEADERS: u8 = frame::HEADERS;
const END_STREAM: u8 = frame::END_STREAM;
const END_HEADERS: u8 = frame::END_HEADERS;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    frame::put_frame(&mut f, kind, flags, stream, payload);
    f
}

/// A request block: `:method` GET (static 2) or POST (3), `:scheme http`
/// (6), `:path` (name 4) and `:authority` (name 1) as literals without
/// indexing, then `extra` fields as literals with new names.
fn block(post: bool, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut b = vec![if post { 0x83 } else { 0x82 }, 0x86];
    b.push(0x04);
    b.push(path.len() as u8);
    b.extend_from_slice(path.as_bytes());
    b.extend_from_slice(&[0x01, 1, b't']);
    for (n, v) in extra {
        b.push(0x00);
        b.push(n.len() as u8);
        b.extend_from_slice(n.as_bytes());
        b.push(v.len() as u8);
        b.extend_from_slice(v.as_bytes());
    }
    b
}

fn get(id: u32) -> Vec<u8> {
    frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        id,
        &block(false, "/", &[]),
    )
}

fn post(id: u32, extra: &[(&str, &str)]) -> Vec<u8> {
    frame(HEADERS, END_HEADERS, id, &block(true, "/up", extra))
}

struct Client {
    conn: Conn,
    input: BytesMut,
}

impl Client {
    /// Preface and an empty SETTINGS, fed; our SETTINGS and the ACK read.
    fn new(cfg: &Config) -> Client {
        let mut c = Client {
            conn: Conn::new(cfg),
            input: BytesMut::new(),
        };
        let mut first = frame::PREFACE.to_vec();
        first.extend(frame(frame::SETTINGS, 0, 0, &[]));
        c.send(&first).unwrap();
        let out = c.frames();
        assert_eq!(out[0].0.kind, frame::SETTINGS);
        assert_eq!(out.last().unwrap().0.kind, frame::SETTINGS);
        assert_eq!(out.last().unwrap().0.flags, frame::ACK);
        c.send(&frame(frame::SETTINGS, frame::ACK, 0, &[])).unwrap();
        c
    }

    fn default() -> Client {
        Client::new(&Config::default())
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), stoa_h2::ConnError> {
        self.input.extend_from_slice(bytes);
        self.conn.recv(&mut self.input)
    }

    fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.conn.next_event()).collect()
    }

    /// The frames written, consumed.
    fn frames(&mut self) -> Vec<(Head, Vec<u8>)> {
        parse(&written(&mut self.conn))
    }
}

/// All the output, piece by piece (a shared body's pieces come apart
/// from the bytes around them), consumed.
fn written(conn: &mut Conn) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let piece = conn.output();
        if piece.is_empty() {
            return out;
        }
        out.extend_from_slice(piece);
        let n = piece.len();
        conn.consume_output(n);
    }
}

fn parse(mut out: &[u8]) -> Vec<(Head, Vec<u8>)> {
    let mut v = Vec::new();
    while !out.is_empty() {
        let h = Head::parse(out[..9].try_into().unwrap());
        v.push((h, out[9..9 + h.len].to_vec()));
        out = &out[9 + h.len..];
    }
    v
}

fn goaway_code(frames: &[(Head, Vec<u8>)]) -> Option<Reason> {
    frames
        .iter()
        .find(|f| f.0.kind == frame::GOAWAY)
        .map(|f| Reason(frame::be32(&f.1[4..])))
}

fn rst_code(frames: &[(Head, Vec<u8>)], id: u32) -> Option<Reason> {
    frames
        .iter()
        .find(|f| f.0.kind == frame::RST_STREAM && f.0.stream == id)
        .map(|f| Reason(frame::be32(&f.1)))
}

fn connection_error(c: &mut Client, bytes: &[u8]) -> Reason {
    let e = c.send(bytes).expect_err("a connection error");
    let code = goaway_code(&c.frames()).expect("GOAWAY");
    assert_eq!(code, e.code);
    assert!(c.conn.is_closed());
    code
}

#[test]
fn rfc9113_3_4_our_settings_go_first_and_the_clients_settings_are_acknowledged() {
    let cfg = Config {
        max_concurrent_streams: 7,
        initial_connection_window_size: 1 << 20,
        ..Config::default()
    };
    let mut c = Conn::new(&cfg);
    let out = parse(c.output());
    assert_eq!(out[0].0.kind, frame::SETTINGS);
    assert!(out[0].1.chunks(6).any(|s| s == [0, 3, 0, 0, 0, 7]));
    assert_eq!(out[1].0.kind, frame::WINDOW_UPDATE);
    assert_eq!(frame::be32(&out[1].1), (1 << 20) - 65_535);
    let mut input = BytesMut::from(&frame::PREFACE[..]);
    input.extend(frame(frame::SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0]));
    c.recv(&mut input).unwrap();
    assert!(input.is_empty());
    let out = parse(c.output());
    assert_eq!(out.last().unwrap().0.flags, frame::ACK);
}

#[test]
fn rfc9113_3_4_a_wrong_preface_is_a_protocol_error() {
    let mut c = Conn::new(&Config::default());
    let mut input = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..]);
    assert_eq!(c.recv(&mut input).unwrap_err().code, Reason::PROTOCOL_ERROR);
}

#[test]
fn rfc9113_3_4_the_preface_must_be_followed_by_settings() {
    let mut c = Conn::new(&Config::default());
    let mut input = BytesMut::from(&frame::PREFACE[..]);
    input.extend(frame(frame::PING, 0, 0, &[0; 8]));
    assert_eq!(c.recv(&mut input).unwrap_err().code, Reason::PROTOCOL_ERROR);
}

#[test]
fn a_get_is_a_request_event_and_its_response_goes_out_as_headers_and_data() {
    let mut c = Client::default();
    c.send(&get(1)).unwrap();
    let ev = c.events();
    let Event::Request {
        id: 1,
        head,
        end_stream: true,
    } = &ev[0]
    else {
        panic!("{ev:?}")
    };
    assert_eq!(head.method(), b"GET");
    assert_eq!(head.path(), Some(&b"/"[..]));
    assert_eq!(head.authority(), Some(&b"t"[..]));
    assert_eq!(c.conn.open_streams(), 1);
    c.conn.send_headers(1, &[0x88], false);
    assert_eq!(c.conn.send_data(1, b"hello", true), 5);
    let out = c.frames();
    assert_eq!(out[0].0.kind, HEADERS);
    assert_eq!(out[0].0.flags, END_HEADERS);
    assert_eq!(out[0].1, [0x88]);
    assert_eq!(out[1].0.kind, DATA);
    assert_eq!(out[1].0.flags, END_STREAM);
    assert_eq!(out[1].1, b"hello");
    assert_eq!(c.conn.open_streams(), 0);
}

#[test]
fn frames_cut_at_any_byte_give_the_same_events() {
    let mut all = frame::PREFACE.to_vec();
    all.extend(frame(frame::SETTINGS, 0, 0, &[]));
    all.extend(post(1, &[("content-length", "6")]));
    all.extend(frame(DATA, 0, 1, b"abc"));
    all.extend(frame(DATA, END_STREAM, 1, b"def"));
    all.extend(get(3));
    for cut in 1..all.len() {
        let mut c = Conn::new(&Config::default());
        let mut input = BytesMut::new();
        let mut ev = Vec::new();
        for piece in all.chunks(cut) {
            input.extend_from_slice(piece);
            c.recv(&mut input).unwrap();
            ev.extend(std::iter::from_fn(|| c.next_event()));
        }
        let body: Vec<u8> = ev
            .iter()
            .filter_map(|e| match e {
                Event::Data { data, .. } => Some(data.to_vec()),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(body, b"abcdef", "cut {cut}");
        assert!(
            matches!(ev.last(), Some(Event::Request { id: 3, .. })),
            "cut {cut}"
        );
    }
}

#[test]
fn rfc9113_6_7_a_ping_is_answered_with_its_payload() {
    let mut c = Client::default();
    c.send(&frame(frame::PING, 0, 0, b"12345678")).unwrap();
    c.send(&frame(frame::PING, frame::ACK, 0, b"12345678"))
        .unwrap();
    let out = c.frames();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0.flags, frame::ACK);
    assert_eq!(out[0].1, b"12345678");
}

#[test]
fn rfc9113_6_7_a_ping_of_the_wrong_size_or_on_a_stream_is_a_connection_error() {
    let mut c = Client::default();
    assert_eq!(
        connection_error(&mut c, &frame(frame::PING, 0, 0, b"1234567")),
        Reason::FRAME_SIZE_ERROR
    );
    let mut c = Client::default();
    assert_eq!(
        connection_error(&mut c, &frame(frame::PING, 0, 1, b"12345678")),
        Reason::PROTOCOL_ERROR
    );
}

#[test]
fn rfc9113_6_5_malformed_settings_are_connection_errors() {
    for (f, code) in [
        (
            frame(frame::SETTINGS, 0, 0, &[0, 4, 0, 0]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (
            frame(frame::SETTINGS, frame::ACK, 0, &[0; 6]),
            Reason::FRAME_SIZE_ERROR,
        ),
        (frame(frame::SETTINGS, 0, 1, &[]), Reason::PROTOCOL_ERROR),
        (
            frame(frame::SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 2]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            frame(frame::SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0]),
            Reason::FLOW_CONTROL_ERROR,
        ),
        (
            frame(frame::SETTINGS, 0, 0, &[0, 5, 0, 0, 0x3f, 0xff]),
            Reason::PROTOCOL_ERROR,
        ),
        (
            frame(frame::SETTINGS, 0, 0, &[0, 5, 1, 0, 0, 0]),
            Reason::PROTOCOL_ERROR,
        ),
    ] {
        let mut c = Client::default();
        assert_eq!(connection_error(&mut c, &f), code, "{f:?}");
    }
    // Unknown settings are ignored (RFC 9113 §6.5.2).
    let mut c = Client::default();
    c.send(&frame(frame::SETTINGS, 0, 0, &[0, 0x99, 0, 0, 0, 1]))
        .unwrap();
}

#[test]
fn rfc9113_4_2_a_frame_past_our_max_frame_size_is_a_frame_size_error() {
    let mut c = Client::default();
    let big = frame(DATA, 0, 1, &vec![0; 16_385]);
    assert_eq!(connection_error(&mut c, &big), Reason::FRAME_SIZE_ERROR);
}

#[test]
fn rfc9113_6_9_request_bodies_count_against_windows_given_back_on_release() {
    let cfg = Config {
        initial_window_size: 1000,
        initial_connection_window_size: 65_535,
        ..Config::default()
    };
    let mut c = Client::new(&cfg);
    c.send(&post(1, &[])).unwrap();
    c.send(&frame(DATA, 0, 1, &[7; 600])).unwrap();
    assert!(c.frames().is_empty(), "nothing released yet");
    c.conn.release(1, 600);
    let out = c.frames();
    // The stream's update (past half its window); the connection's waits
    // for half of 65,535.
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!((out[0].0.kind, out[0].0.stream), (frame::WINDOW_UPDATE, 1));
    assert_eq!(frame::be32(&out[0].1), 600);
    // 1000 - 600 + 600 = 1000 may come now; 1001 is too much.
    c.send(&frame(DATA, 0, 1, &[7; 1000])).unwrap();
    c.send(&frame(DATA, 0, 1, &[7; 1])).unwrap();
    assert_eq!(rst_code(&c.frames(), 1), Some(Reason::FLOW_CONTROL_ERROR));
    let ev = c.events();
    assert!(matches!(
        ev.last(),
        Some(Event::Reset {
            id: 1,
            code: Reason::FLOW_CONTROL_ERROR
        })
    ));
}

#[test]
fn rfc9113_6_9_1_data_past_the_connection_window_is_a_flow_control_error() {
    let mut c = Client::default();
    for id in [1, 3, 5, 7, 9] {
        c.send(&post(id, &[])).unwrap();
    }
    for id in [1, 3, 5, 7] {
        c.send(&frame(DATA, 0, id, &[0; 16_000])).unwrap();
    }
    assert_eq!(
        connection_error(&mut c, &frame(DATA, 0, 9, &[0; 2_000])),
        Reason::FLOW_CONTROL_ERROR
    );
}

#[test]
fn padding_counts_against_the_windows_and_is_given_back_at_once() {
    let mut c = Client::new(&Config {
        initial_window_size: 100,
        ..Config::default()
    });
    c.send(&post(1, &[])).unwrap();
    let mut p = vec![59];
    p.extend_from_slice(b"body");
    p.extend_from_slice(&[0; 59]);
    c.send(&frame(DATA, frame::PADDED, 1, &p)).unwrap();
    let ev = c.events();
    assert!(matches!(&ev[1], Event::Data { data, .. } if &data[..] == b"body"));
    let out = c.frames();
    assert_eq!(out[0].0.kind, frame::WINDOW_UPDATE);
    assert_eq!(frame::be32(&out[0].1), 60);
}

#[test]
fn rfc9113_6_1_padding_as_long_as_the_payload_is_a_protocol_error() {
    let mut c = Client::default();
    c.send(&post(1, &[])).unwrap();
    assert_eq!(
        connection_error(&mut c, &frame(DATA, frame::PADDED, 1, &[4, 0, 0, 0])),
        Reason::PROTOCOL_ERROR
    );
}

#[test]
fn rfc9113_6_9_sending_stops_at_the_clients_window_and_resumes_on_window_update() {
    let mut c = Client::default();
    c.send(&frame(frame::SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 10]))
        .unwrap();
    c.send(&get(1)).unwrap();
    c.events();
    c.frames();
    c.conn.send_headers(1, &[0x88], false);
    assert_eq!(c.conn.send_window(1), 10);
    assert_eq!(c.conn.send_data(1, &[1; 25], true), 10);
    assert_eq!(c.conn.send_window(1), 0);
    assert_eq!(c.conn.send_data(1, &[1; 15], true), 0);
    c.send(&frame(frame::WINDOW_UPDATE, 0, 1, &[0, 0, 0, 20]))
        .unwrap();
    assert!(matches!(c.events()[..], [Event::WindowUpdate { id: 1 }]));
    assert_eq!(c.conn.send_data(1, &[1; 15], true), 15);
    let out = c.frames();
    let data: Vec<_> = out.iter().filter(|f| f.0.kind == DATA).collect();
    assert_eq!(data.len(), 2);
    assert_eq!(data[1].0.flags, END_STREAM);
    // RFC 9113 §6.9.2: a new SETTINGS_INITIAL_WINDOW_SIZE moves every
    // stream's window by the difference.
    c.send(&get(3)).unwrap();
    assert_eq!(c.conn.send_window(3), 10);
    c.send(&frame(frame::SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 30]))
        .unwrap();
    assert_eq!(c.conn.send_window(3), 30);
}

#[test]
fn rfc9113_6_9_1_a_window_past_2_31_minus_1_is_a_flow_control_error() {
    let mut c = Client::default();
    c.send(&get(1)).unwrap();
    c.send(&frame(
        frame::WINDOW_UPDATE,
        0,
        1,
        &[0x7f, 0xff, 0xff, 0xff],
    ))
    .unwrap();
    assert_eq!(rst_code(&c.frames(), 1), Some(Reason::FLOW_CONTROL_ERROR));
    assert_eq!(
        connection_error(
            &mut c,
            &frame(frame::WINDOW_UPDATE, 0, 0, &[0x7f, 0xff, 0xff, 0xff])
        ),
        Reason::FLOW_CONTROL_ERROR
    );
}

#[test]
fn rfc9113_6_9_a_window_update_of_zero_is_a_protocol_error() {
    let mut c = Client::default();
    c.send(&get(1)).unwrap();
    c.send(&frame(frame::WINDOW_UPDATE, 0, 1, &[0; 4])).unwrap();
    assert_eq!(rst_code(&c.frames(), 1), Some(Reason::PROTOCOL_ERROR));
    assert_eq!(
        connection_error(&mut c, &frame(frame::WINDOW_UPDATE, 0, 0, &[0; 4])),
        Reason::PROTOCOL_ERROR
    );
}

#[test]
fn a_response_head_is_split_into_continuation_frames_at_the_clients_frame_size() {
    let mut c = Client::default();
    c.send(&get(1)).unwrap();
    c.frames();
    let head = vec![0x88; 40_000];
    c.conn.send_headers(1, &head, true);
    let out = c.frames();
    let kinds: Vec<_> = out
        .iter()
        .map(|f| (f.0.kind, f.0.flags, f.1.len()))
        .collect();
    assert_eq!(
        kinds,
        [
            (HEADERS, END_STREAM, 16_384),
            (frame::CONTINUATION, 0, 16_384),
            (frame::CONTINUATION, END_HEADERS, 40_000 - 2 * 16_384)
        ]
    );
}

#[test]
fn rfc9113_6_10_a_header_block_in_continuation_frames_is_one_request() {
    let mut c = Client::default();
    let b = block(false, "/split", &[("x-a", "1")]);
    c.send(&frame(HEADERS, END_STREAM, 1, &b[..3])).unwrap();
    c.send(&frame(frame::CONTINUATION, 0, 1, &b[3..5])).unwrap();
    assert!(c.events().is_empty());
    c.send(&frame(frame::CONTINUATION, END_HEADERS, 1, &b[5..]))
        .unwrap();
    let ev = c.events();
    let Event::Request { head, .. } = &ev[0] else {
        panic!("{ev:?}")
    };
    assert_eq!(head.path(), Some(&b"/split"[..]));
}

#[test]
fn rfc9113_6_10_another_frame_inside_a_header_block_is_a_protocol_error() {
    let b = block(false, "/", &[]);
    let mut c = Client::default();
    c.send(&frame(HEADERS, END_STREAM, 1, &b[..3])).unwrap();
    assert_eq!(
        connection_error(&mut c, &frame(frame::PING, 0, 0, &[0; 8])),
        Reason::PROTOCOL_ERROR
    );
    let mut c = Client::default();
    c.send(&frame(HEADERS, END_STREAM, 1, &b[..3])).unwrap();
    assert_eq!(
        connection_error(&mut c, &frame(frame::CONTINUATION, END_HEADERS, 3, &b[3..])),
        Reason::PROTOCOL_ERROR
    );
    let mut c = Client::default();
    assert_eq!(
        connection_error(&mut c, &frame(frame::CONTINUATION, END_HEADERS, 1, &b)),
        Reason::PROTOCOL_ERROR
    );
}

#[test]
fn cve_2024_27316_a_continuation_flood_gets_goaway_enhance_your_calm() {
    let mut c = Client::default();
    c.send(&frame(HEADERS, 0, 1, &block(false, "/", &[])))
        .unwrap();
    let field = block(false, "", &[("x-flood", &"a".repeat(100))])[7..].to_vec();
    let e = (0..10_000)
        .find_map(|_| c.send(&frame(frame::CONTINUATION, 0, 1, &field)).err())
        .expect("stopped");
    assert_eq!(e.code, Reason::ENHANCE_YOUR_CALM);
    assert!(c.input.capacity() < 64 << 10);
}

#[test]
fn cve_2024_27316_empty_continuation_frames_are_counted_too() {
    let mut c = Client::default();
    c.send(&frame(HEADERS, 0, 1, &block(false, "/", &[])))
        .unwrap();
    let e = (0..10_000)
        .find_map(|_| c.send(&frame(frame::CONTINUATION, 0, 1, &[])).err())
        .expect("stopped");
    assert_eq!(e.code, Reason::ENHANCE_YOUR_CALM);
}

#[test]
fn rfc9113_10_5_1_a_header_list_past_the_limit_is_headers_too_large_and_its_body_is_dropped() {
    let mut c = Client::new(&Config {
        max_header_list_size: 100,
        ..Config::default()
    });
    c.send(&post(1, &[("x-big", &"b".repeat(120))])).unwrap();
    c.send(&frame(DATA, 0, 1, &[0; 16_000])).unwrap();
    c.send(&frame(DATA, 0, 1, &[0; 16_000])).unwrap();
    c.send(&frame(DATA, END_STREAM, 1, &[0; 16_000])).unwrap();
    let ev = c.events();
    assert!(
        matches!(ev[..], [Event::HeadersTooLarge { id: 1 }]),
        "{ev:?}"
    );
    // The dropped body's bytes went back to the connection window.
    let out = c.frames();
    assert!(out
        .iter()
        .any(|f| f.0.kind == frame::WINDOW_UPDATE && f.0.stream == 0));
    c.conn.send_headers(1, &[0x08, 3, b'4', b'3', b'1'], true);
    assert_eq!(c.conn.open_streams(), 0);
}

#[test]
fn rfc9113_8_1_1_a_malformed_request_is_a_stream_error_without_an_event() {
    let mut c = Client::default();
    c.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &block(false, "/", &[("connection", "close")]),
    ))
    .unwrap();
    assert!(c.events().is_empty());
    assert_eq!(rst_code(&c.frames(), 1), Some(Reason::PROTOCOL_ERROR));
    // The connection goes on.
    c.send(&get(3)).unwrap();
    assert!(matches!(c.events()[..], [Event::Request { id: 3, .. }]));
}

#[test]
fn rfc9113_8_1_1_a_body_longer_or_shorter_than_content_length_is_a_stream_error() {
    let mut c = Client::default();
    c.send(&post(1, &[("content-length", "3")])).unwrap();
    c.send(&frame(DATA, 0, 1, b"abcd")).unwrap();
    assert_eq!(rst_code(&c.frames(), 1), Some(Reason::PROTOCOL_ERROR));
    assert!(matches!(
        c.events()[..],
        [Event::Request { .. }, Event::Reset { id: 1, .. }]
    ));
    c.send(&post(3, &[("content-length", "3")])).unwrap();
    c.send(&frame(DATA, END_STREAM, 3, b"ab")).unwrap();
    assert_eq!(rst_code(&c.frames(), 3), Some(Reason::PROTOCOL_ERROR));
    c.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        5,
        &block(true, "/", &[("content-length", "3")]),
    ))
    .unwrap();
    assert_eq!(rst_code(&c.frames(), 5), Some(Reason::PROTOCOL_ERROR));
}

#[test]
fn rfc9113_8_1_trailers_end_the_request_and_need_end_stream() {
    let mut c = Client::default();
    c.send(&post(1, &[])).unwrap();
    c.send(&frame(DATA, 0, 1, b"x")).unwrap();
    let t = [0x00, 4, b'g', b'r', b'p', b'c', 1, b'0'];
    c.send(&frame(HEADERS, END_HEADERS | END_STREAM, 1, &t))
        .unwrap();
    let ev = c.events();
    let Event::Trailers { id: 1, fields } = &ev[2] else {
        panic!("{ev:?}")
    };
    assert_eq!(&fields[0].0[..], b"grpc");
    c.send(&post(3, &[])).unwrap();
    c.send(&frame(HEADERS, END_HEADERS, 3, &t)).unwrap();
    assert_eq!(rst_code(&c.frames(), 3), Some(Reason::PROTOCOL_ERROR));
}

#[test]
fn rfc9113_5_1_frames_on_idle_streams_are_protocol_errors() {
    for f in [
        frame(DATA, 0, 1, b"x"),
        frame(frame::RST_STREAM, 0, 1, &[0, 0, 0, 8]),
        frame(frame::WINDOW_UPDATE, 0, 1, &[0, 0, 0, 1]),
        frame(HEADERS, END_HEADERS, 2, &block(false, "/", &[])),
    ] {
        let mut c = Client::default();
        assert_eq!(
            connection_error(&mut c, &f),
            Reason::PROTOCOL_ERROR,
            "{f:?}"
        );
    }
    // PRIORITY is allowed on an idle stream (RFC 9113 §5.1).
    let mut c = Client::default();
    c.send(&frame(frame::PRIORITY, 0, 5, &[0, 0, 0, 1, 16]))
        .unwrap();
    assert!(c.frames().is_empty());
}

#[test]
fn rfc9113_5_1_data_after_end_stream_is_a_stream_closed_error() {
    let mut c = Client::default();
    c.send(&get(1)).unwrap();
    c.send(&frame(DATA, 0, 1, b"x")).unwrap();
    assert_eq!(rst_code(&c.frames(), 1), Some(Reason::STREAM_CLOSED));
}

#[test]
fn rfc9113_5_1_headers_on_a_closed_stream_is_a_stream_closed_connection_error() {
    let mut c = Client::default();
    c.send(&get(1)).unwrap();
    c.conn.send_headers(1, &[0x88], true);
    assert_eq!(c.conn.open_streams(), 0);
    assert_eq!(connection_error(&mut c, &get(1)), Reason::STREAM_CLOSED);
}

#[test]
fn rfc9113_5_1_1_a_stream_id_below_the_last_one_is_a_protocol_error() {
    let mut c = Client::default();
    c.send(&get(5)).unwrap();
    assert_eq!(connection_error(&mut c, &get(3)), Reason::PROTOCOL_ERROR);
}

#[test]
fn rfc9113_5_1_what_was_in_flight_when_we_reset_a_stream_is_ignored() {
    let mut c = Client::default();
    c.send(&post(1, &[])).unwrap();
    c.conn.reset(1, Reason::CANCEL);
    assert_eq!(rst_code(&c.frames(), 1), Some(Reason::CANCEL));
    c.send(&frame(DATA, 0, 1, b"late")).unwrap();
    c.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        1,
        &[0x40, 1, b'a', 1, b'b'],
    ))
    .unwrap();
    assert!(c.frames().is_empty());
    c.events();
    // The late trailers still reached the HPACK table: index 62 is "a: b".
    c.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM,
        3,
        &[0x82, 0x86, 0x84, 0x01, 1, b't', 0xbe],
    ))
    .unwrap();
    let ev = c.events();
    let Event::Request { head, .. } = &ev[0] else {
        panic!("{ev:?}")
    };
    assert_eq!(head.fields().next(), Some((&b"a"[..], &b"b"[..])));
}

#[test]
fn rfc9113_6_4_the_clients_reset_is_an_event_and_later_frames_on_it_are_ignored() {
    let mut c = Client::default();
    c.send(&post(1, &[])).unwrap();
    c.events();
    c.send(&frame(frame::RST_STREAM, 0, 1, &[0, 0, 0, 8]))
        .unwrap();
    assert!(matches!(
        c.events()[..],
        [Event::Reset {
            id: 1,
            code: Reason::CANCEL
        }]
    ));
    assert_eq!(c.conn.send_window(1), 0);
    c.conn.send_headers(1, &[0x88], true);
    assert_eq!(c.conn.send_data(1, b"x", true), 0);
    c.send(&frame(frame::WINDOW_UPDATE, 0, 1, &[0, 0, 0, 1]))
        .unwrap();
    c.send(&frame(frame::RST_STREAM, 0, 1, &[0, 0, 0, 8]))
        .unwrap();
    assert!(c.frames().is_empty());
}

#[test]
fn rfc9113_5_1_2_streams_past_max_concurrent_streams_are_refused() {
    let mut c = Client::new(&Config {
        max_concurrent_streams: 2,
        ..Config::default()
    });
    for id in [1, 3, 5] {
        c.send(&post(id, &[])).unwrap();
    }
    assert_eq!(c.events().len(), 2);
    assert_eq!(rst_code(&c.frames(), 5), Some(Reason::REFUSED_STREAM));
    c.send(&frame(DATA, END_STREAM, 5, b"late")).unwrap();
    assert!(c.frames().is_empty());
}

#[test]
fn rfc9113_5_3_1_a_stream_that_depends_on_itself_is_a_protocol_error() {
    let mut c = Client::default();
    let mut p = vec![0, 0, 0, 1, 16];
    p.extend(block(false, "/", &[]));
    c.send(&frame(
        HEADERS,
        END_HEADERS | END_STREAM | frame::PRIORITY_FLAG,
        1,
        &p,
    ))
    .unwrap();
    assert_eq!(rst_code(&c.frames(), 1), Some(Reason::PROTOCOL_ERROR));
    c.send(&frame(frame::PRIORITY, 0, 3, &[0, 0, 0, 3, 16]))
        .unwrap();
    assert_eq!(rst_code(&c.frames(), 3), Some(Reason::PROTOCOL_ERROR));
}

#[test]
fn rfc9113_4_3_a_block_that_does_not_decode_is_a_compression_error() {
    let mut c = Client::default();
    assert_eq!(
        connection_error(&mut c, &frame(HEADERS, END_HEADERS, 1, &[0x80])),
        Reason::COMPRESSION_ERROR
    );
}

#[test]
fn rfc9113_5_5_unknown_frames_are_ignored_and_push_promise_is_an_error() {
    let mut c = Client::default();
    c.send(&frame(0x42, 0xff, 0, b"anything")).unwrap();
    c.send(&frame(0x42, 0, 7, b"anything")).unwrap();
    assert!(c.frames().is_empty());
    assert_eq!(
        connection_error(
            &mut c,
            &frame(frame::PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2])
        ),
        Reason::PROTOCOL_ERROR
    );
}

#[test]
fn cve_2023_44487_streams_opened_and_reset_in_one_read_get_goaway_enhance_your_calm() {
    let mut c = Client::default();
    let mut burst = Vec::new();
    for i in 0..100 {
        let id = 1 + 2 * i;
        burst.extend(post(id, &[]));
        burst.extend(frame(frame::RST_STREAM, 0, id, &[0, 0, 0, 8]));
    }
    assert_eq!(connection_error(&mut c, &burst), Reason::ENHANCE_YOUR_CALM);
    // A client resetting what the server already took is only cancelling.
    let mut c = Client::default();
    for i in 0..100 {
        let id = 1 + 2 * i;
        c.send(&post(id, &[])).unwrap();
        c.events();
        c.send(&frame(frame::RST_STREAM, 0, id, &[0, 0, 0, 8]))
            .unwrap();
    }
}

#[test]
fn too_many_stream_errors_on_one_connection_get_goaway_enhance_your_calm() {
    let mut c = Client::new(&Config {
        max_local_error_reset_streams: 10,
        ..Config::default()
    });
    let bad = |id| {
        frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            id,
            &block(false, "/", &[("te", "x")]),
        )
    };
    for i in 0..10 {
        c.send(&bad(1 + 2 * i)).unwrap();
    }
    assert_eq!(
        connection_error(&mut c, &bad(21)),
        Reason::ENHANCE_YOUR_CALM
    );
}

#[test]
fn cve_2019_9512_a_ping_flood_past_the_budget_gets_goaway_enhance_your_calm() {
    let mut c = Client::new(&Config {
        max_control_frames: 50,
        ..Config::default()
    });
    let e = (0..1000)
        .find_map(|_| {
            let r = c.send(&frame(frame::PING, 0, 0, &[0; 8])).err();
            c.frames();
            r
        })
        .expect("stopped");
    assert_eq!(e.code, Reason::ENHANCE_YOUR_CALM);
}

#[test]
fn a_client_that_does_not_read_cannot_grow_our_output_past_the_high_mark() {
    let mut c = Client::new(&Config {
        max_control_frames: 0,
        ..Config::default()
    });
    let pings: Vec<u8> = (0..20_000)
        .flat_map(|_| frame(frame::PING, 0, 0, &[0; 8]))
        .collect();
    c.send(&pings).unwrap();
    assert!(c.conn.backlogged());
    assert!(c.conn.output().len() < OUTPUT_HIGH + 17);
    assert!(!c.input.is_empty(), "the rest waits");
    c.frames();
    c.conn.recv(&mut c.input).unwrap();
    assert!(c.conn.output().len() < OUTPUT_HIGH + 17);
}

#[test]
fn cve_2019_9518_empty_data_frames_get_goaway_enhance_your_calm() {
    let mut c = Client::default();
    c.send(&post(1, &[])).unwrap();
    let e = (0..1000)
        .find_map(|_| c.send(&frame(DATA, 0, 1, &[])).err())
        .expect("stopped");
    assert_eq!(e.code, Reason::ENHANCE_YOUR_CALM);
}

#[test]
fn rfc9113_6_8_a_graceful_goaway_lets_streams_finish_and_ignores_new_ones() {
    let mut c = Client::default();
    c.send(&get(1)).unwrap();
    c.events();
    c.conn.go_away(Reason::NO_ERROR);
    let out = c.frames();
    assert_eq!(goaway_code(&out), Some(Reason::NO_ERROR));
    assert_eq!(frame::be32(&out[0].1), 1);
    c.send(&get(3)).unwrap();
    assert!(c.events().is_empty());
    assert!(!c.conn.is_closed());
    c.conn.send_headers(1, &[0x88], true);
    assert!(c.conn.is_closed());
}

#[test]
fn rfc9113_6_8_the_clients_goaway_is_an_event() {
    let mut c = Client::default();
    c.send(&frame(frame::GOAWAY, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 0]))
        .unwrap();
    assert!(matches!(
        c.events()[..],
        [Event::GoAway {
            last_stream_id: 0,
            code: Reason::NO_ERROR
        }]
    ));
    assert!(c.conn.is_closed());
}

#[test]
fn rfc7541_4_2_a_lowered_header_table_size_is_signalled_at_the_next_block() {
    let mut c = Client::default();
    c.send(&frame(frame::SETTINGS, 0, 0, &[0, 1, 0, 0, 0, 0]))
        .unwrap();
    c.send(&get(1)).unwrap();
    c.send(&get(3)).unwrap();
    c.frames();
    c.conn.send_headers(1, &[0x88], true);
    c.conn.send_headers(3, &[0x88], true);
    let out = c.frames();
    assert_eq!(out[0].1, [0x20, 0x88]);
    assert_eq!(out[1].1, [0x88]);
}

#[test]
fn rfc9113_8_1_the_dropped_body_of_a_431_request_gives_the_stream_window_back_too() {
    let mut c = Client::new(&Config {
        max_header_list_size: 100,
        initial_window_size: 100,
        ..Config::default()
    });
    c.send(&post(1, &[("x-big", &"b".repeat(120))])).unwrap();
    c.conn.send_headers(1, &[0x08, 3, b'4', b'3', b'1'], true);
    c.frames();
    c.send(&frame(DATA, 0, 1, &[0; 60])).unwrap();
    let out = c.frames();
    assert!(
        out.iter().any(|f| f.0.kind == frame::WINDOW_UPDATE
            && f.0.stream == 1
            && frame::be32(&f.1) == 60),
        "{out:?}"
    );
    c.send(&frame(DATA, END_STREAM, 1, &[0; 100])).unwrap();
    assert_eq!(c.conn.open_streams(), 0);
}

#[test]
fn cve_2016_6581_a_one_frame_block_past_the_list_limit_and_a_frame_gets_enhance_your_calm() {
    let mut c = Client::new(&Config {
        max_frame_size: 1 << 20,
        ..Config::default()
    });
    // One literal into the table, then 40,000 references to it: 160 MB
    // of header list from 44 KB.
    let mut b = vec![
        0x40,
        1,
        b'x',
        0x7f,
        0x80 | (3873 & 0x7f) as u8,
        (3873 >> 7) as u8,
    ];
    b.extend_from_slice(&[b'a'; 4000]);
    b.extend(std::iter::repeat_n(0x80 | 62, 40_000));
    assert_eq!(
        connection_error(&mut c, &frame(HEADERS, END_HEADERS | END_STREAM, 1, &b)),
        Reason::ENHANCE_YOUR_CALM
    );
}

#[test]
fn an_idle_connection_gives_its_buffers_back_and_goes_on() {
    let mut c = Client::default();
    c.send(&post(1, &[])).unwrap();
    c.send(&frame(DATA, END_STREAM, 1, &[1; 10_000])).unwrap();
    c.events();
    c.conn.send_headers(1, &[0x88], false);
    c.conn.send_data(1, &[2; 60_000], true);
    c.frames();
    c.conn.shrink_idle();
    c.send(&get(3)).unwrap();
    assert!(matches!(c.events()[..], [Event::Request { id: 3, .. }]));
}

#[test]
fn after_our_reset_no_queued_event_names_the_stream() {
    let mut c = Client::default();
    let mut burst = post(1, &[]);
    burst.extend(frame(DATA, 0, 1, b"abc"));
    burst.extend(get(3));
    burst.extend(frame(DATA, END_STREAM, 1, b"def"));
    c.send(&burst).unwrap();
    let Some(Event::Request { id: 1, .. }) = c.conn.next_event() else {
        panic!("a request first")
    };
    c.conn.reset(1, Reason::CANCEL);
    let ev = c.events();
    assert!(matches!(ev[..], [Event::Request { id: 3, .. }]), "{ev:?}");
}

#[test]
fn data_frames_can_be_capped_below_the_clients_frame_size_to_fit_tls_records() {
    let mut c = Client::default();
    c.conn.set_max_data_frame(16_384 - 9);
    c.send(&get(1)).unwrap();
    c.frames();
    c.conn.send_headers(1, &[0x88], false);
    assert_eq!(c.conn.send_data(1, &[0; 40_000], true), 40_000);
    let sizes: Vec<usize> = c
        .frames()
        .iter()
        .filter(|f| f.0.kind == DATA)
        .map(|f| f.1.len())
        .collect();
    assert_eq!(sizes, [16_375, 16_375, 40_000 - 2 * 16_375]);
}

#[test]
fn output_written_in_small_pieces_comes_out_whole_and_in_order() {
    let mut c = Client::new(&Config {
        initial_connection_window_size: 1 << 20,
        ..Config::default()
    });
    c.send(&frame(frame::SETTINGS, 0, 0, &[0, 4, 0, 0x10, 0, 0]))
        .unwrap();
    c.send(&frame(frame::WINDOW_UPDATE, 0, 0, &[0, 0x10, 0, 0]))
        .unwrap();
    c.send(&get(1)).unwrap();
    c.frames();
    c.conn.send_headers(1, &[0x88], false);
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(c.conn.send_data(1, &body, true), body.len());
    let mut written = Vec::new();
    while !c.conn.output().is_empty() {
        let n = c.conn.output().len().min(7_000);
        written.extend_from_slice(&c.conn.output()[..n]);
        c.conn.consume_output(n);
    }
    let data: Vec<u8> = parse(&written)
        .into_iter()
        .filter(|f| f.0.kind == DATA)
        .flat_map(|f| f.1)
        .collect();
    assert_eq!(data, body);
}

#[test]
fn a_run_of_window_updates_is_one_event() {
    let mut c = Client::default();
    c.send(&get(1)).unwrap();
    c.events();
    let mut burst = Vec::new();
    for _ in 0..1000 {
        burst.extend(frame(frame::WINDOW_UPDATE, 0, 0, &[0, 0, 0, 1]));
        burst.extend(frame(frame::WINDOW_UPDATE, 0, 1, &[0, 0, 0, 1]));
    }
    c.send(&burst).unwrap();
    assert!(matches!(c.events()[..], [Event::WindowUpdate { id: 0 }]));
    assert_eq!(c.conn.send_window(1), 65_535 + 1000);
}

/// A request given back (`Conn::recycle`) is the memory the next request
/// head is decoded into: the next request must carry its own fields and
/// pseudo-headers only (RFC 9113 §8.3.1), none of the previous one's,
/// and a body length only if it sent one (§8.1.1).
#[test]
fn a_request_decoded_into_a_recycled_one_carries_nothing_of_it() {
    let mut c = Client::default();
    c.send(&post(
        1,
        &[("content-length", "3"), ("x-first", "only here")],
    ))
    .unwrap();
    let mut ev = c.events();
    let Some(Event::Request { id: 1, head, .. }) = ev.pop() else {
        panic!("{ev:?}")
    };
    assert_eq!(head.content_length(), Some(3));
    c.conn.recycle(head);
    c.send(&get(3)).unwrap();
    let ev = c.events();
    let Some(Event::Request { id: 3, head, .. }) = ev.first() else {
        panic!("{ev:?}")
    };
    assert_eq!(head.method(), b"GET");
    assert_eq!(head.path(), Some(&b"/"[..]));
    assert_eq!(head.authority(), Some(&b"t"[..]));
    assert_eq!(head.content_length(), None);
    assert_eq!(
        head.fields().count(),
        0,
        "{:?}",
        head.fields().collect::<Vec<_>>()
    );
}

/// An idle connection's state is what it keeps between requests: a
/// stream in progress means it is not at rest; once its response ended,
/// it is (and its buffers can go, the HPACK table staying: RFC 7541
/// §2.3.2).
#[test]
fn a_connection_is_at_rest_only_with_no_stream_event_or_output_waiting() {
    let mut c = Client::default();
    assert!(c.conn.at_rest());
    c.send(&get(1)).unwrap();
    assert!(!c.conn.at_rest(), "an event and a stream are waiting");
    let _ = c.events();
    assert!(!c.conn.at_rest(), "stream 1 is open");
    c.conn.send_headers(1, &[0x88], true);
    assert!(!c.conn.at_rest(), "its response is not written");
    let _ = c.frames();
    assert!(c.conn.at_rest());
    c.conn.shrink_idle();
    c.send(&get(3)).unwrap();
    assert!(matches!(
        c.events().first(),
        Some(Event::Request { id: 3, .. })
    ));
}

/// Two connections in the same state with a GET open on stream 1 and 3.
fn two_gets() -> Client {
    let mut c = Client::default();
    let mut both = get(1);
    both.extend(get(3));
    c.send(&both).unwrap();
    assert_eq!(c.events().len(), 2);
    c
}

#[test]
fn rfc9113_6_1_a_shared_body_goes_out_as_the_same_frames_as_a_copied_one() {
    // Frames cut at the client's max frame size (16,384, §4.2), the
    // stream's window (65,535, §6.9.2) bounding what is taken, and frames
    // of other streams in between kept in their order.
    let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let mut copied = two_gets();
    let mut shared = two_gets();
    let took = copied.conn.send_data(1, &body[..700], false);
    assert_eq!(took, 700);
    let mut small = bytes::Bytes::copy_from_slice(&body[..700]);
    assert_eq!(shared.conn.send_data_shared(1, &mut small, false), 700);
    assert!(small.is_empty());
    let rest = &body[700..40_700];
    assert_eq!(copied.conn.send_data(1, rest, false), 40_000);
    let mut b = bytes::Bytes::copy_from_slice(rest);
    assert_eq!(shared.conn.send_data_shared(1, &mut b, false), 40_000);
    for c in [&mut copied, &mut shared] {
        c.conn.send_headers(3, &[0x88], false);
        c.conn.send_data(3, b"three", true);
    }
    let mut big = bytes::Bytes::copy_from_slice(&body);
    // The connection's window (65,535) less what both streams sent.
    let want = 65_535 - 40_700 - 5;
    assert_eq!(copied.conn.send_data(1, &body, true), want);
    assert_eq!(shared.conn.send_data_shared(1, &mut big, true), want);
    assert_eq!(big.len(), body.len() - want, "what was not taken stays");
    assert_eq!(copied.conn.output_len(), shared.conn.output_len());

    // Written in uneven vectored writes, as a socket takes them.
    let mut out = Vec::new();
    loop {
        let mut slices = [std::io::IoSlice::new(&[]); 4];
        let n = shared.conn.output_vectored(&mut slices);
        if n == 0 {
            break;
        }
        let mut budget = 7_001;
        let mut wrote = 0;
        for s in &slices[..n] {
            let k = s.len().min(budget);
            out.extend_from_slice(&s[..k]);
            budget -= k;
            wrote += k;
        }
        shared.conn.consume_output(wrote);
    }
    assert_eq!(shared.conn.output_len(), 0);
    let frames = parse(&out);
    assert_eq!(frames, copied.frames());
    assert!(frames.iter().all(|(h, _)| h.len <= 16_384));
    assert!(frames.iter().any(|(h, _)| h.stream == 3));
    assert!(shared.conn.output().is_empty());
}

#[test]
fn a_shared_body_is_not_copied_into_the_output() {
    let mut c = two_gets();
    let body = bytes::Bytes::from(vec![7u8; 20_000]);
    let mut b = body.clone();
    c.conn.send_data_shared(1, &mut b, true);
    // The first piece is the frame header; the next is the body's own
    // memory.
    assert_eq!(c.conn.output().len(), 9);
    c.conn.consume_output(9);
    assert_eq!(c.conn.output().as_ptr(), body.as_ptr());
    assert_eq!(c.conn.output().len(), 16_384);
    c.conn.consume_output(16_384);
    let rest = parse(&written(&mut c.conn));
    assert_eq!(rest.len(), 1, "the frame header of the rest, then it");
    assert!(rest[0].0.flags & END_STREAM != 0);
}
