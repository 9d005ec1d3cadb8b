//! HTTP/3 for the load generator (RFC 9114): what a client writes on a
//! request stream and reads from a response stream, on the workspace's own
//! codec (stoa-h3: frames, QPACK). The QUIC side (quinn-proto on the
//! engine's UDP sockets) is in `quic.rs` and the engine's `h3` part.
//!
//! QPACK (RFC 9204) is used without its dynamic table, in both directions:
//! we announce SETTINGS_QPACK_MAX_TABLE_CAPACITY 0, so a server's field
//! sections refer only to the static table and literals, and our own
//! request sections are the same bytes on every stream of every
//! connection, encoded once before the run (as the HTTP/2 client does
//! with HPACK). So the client needs no encoder or decoder stream
//! (RFC 9204 §4.2 lets an endpoint not open them).

use stoa_h3::frame::{self, Event, RequestReader, Settings};
use stoa_h3::qpack::{Decoded, Decoder, Encoder, Fields};
use stoa_h3::varint;

pub use stoa_h3::frame::STREAM_CONTROL as CONTROL_STREAM;
/// Largest response field section accepted.
pub const MAX_FIELD_SECTION: usize = 64 * 1024;

/// HTTP/3 error codes (RFC 9114 §8.1) the client sends.
pub const H3_NO_ERROR: u64 = stoa_h3::Code::NoError as u64;
pub const H3_REQUEST_CANCELLED: u64 = stoa_h3::Code::RequestCancelled as u64;

/// The name of an HTTP/3 error code, for messages.
pub fn error_name(code: u64) -> String {
    use stoa_h3::Code as C;
    let known = [
        C::NoError,
        C::GeneralProtocolError,
        C::InternalError,
        C::StreamCreationError,
        C::ClosedCriticalStream,
        C::FrameUnexpected,
        C::FrameError,
        C::ExcessiveLoad,
        C::IdError,
        C::SettingsError,
        C::MissingSettings,
        C::RequestRejected,
        C::RequestCancelled,
        C::RequestIncomplete,
        C::MessageError,
        C::ConnectError,
        C::VersionFallback,
        C::QpackDecompressionFailed,
        C::QpackEncoderStreamError,
        C::QpackDecoderStreamError,
    ];
    match known.iter().find(|c| c.value() == code) {
        Some(c) => format!("{c:?} (0x{code:x})"),
        None => format!("0x{code:x}"),
    }
}

/// Reads a variable-length integer at the start of `b` (RFC 9000 §16).
pub fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    varint::decode(b)
}

/// What the client writes on its control stream (§6.2.1): the stream type
/// and SETTINGS (§7.2.4), with the largest field section it accepts; the
/// QPACK settings stay 0 (no dynamic table, no blocked streams).
pub fn control_stream() -> Vec<u8> {
    let mut out = Vec::new();
    varint::encode(&mut out, frame::STREAM_CONTROL);
    Settings {
        max_field_section_size: Some(MAX_FIELD_SECTION as u64),
        ..Settings::default()
    }
    .put_frame(&mut out);
    out
}

/// A request as HTTP/3 sends it: the whole request stream (HEADERS and,
/// with a body, DATA), the same on every stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H3Request {
    pub wire: Vec<u8>,
}

impl H3Request {
    /// The HTTP/3 form of a serialized HTTP/1 request (its last `body_len`
    /// bytes the body), with the same fields as over HTTP/2 (RFC 9114
    /// §4.2, §4.3.1: pseudo-headers, lowercase names, no connection-
    /// specific fields).
    pub fn from_h1(bytes: &[u8], body_len: usize, scheme: &str) -> Result<H3Request, String> {
        let r = crate::h2::split_h1(bytes, body_len)?;
        let (method, path, authority, fields, body) = (
            r.method,
            r.path,
            r.authority.unwrap_or(""),
            r.fields,
            r.body,
        );
        let mut section = Vec::new();
        Encoder::prefix(&mut section);
        Encoder::request(
            &mut section,
            method.as_bytes(),
            scheme.as_bytes(),
            authority.as_bytes(),
            path.as_bytes(),
        );
        for (n, v) in &fields {
            Encoder::field(&mut section, n.as_bytes(), v.as_bytes());
        }
        let mut wire = Vec::with_capacity(section.len() + body.len() + 16);
        frame::put_frame(&mut wire, frame::HEADERS, &section);
        if !body.is_empty() {
            frame::put_frame(&mut wire, frame::DATA, body);
        }
        Ok(H3Request { wire })
    }
}

/// Why a response stream failed: a connection error with its HTTP/3 code
/// (a frame not allowed on a request stream, a bad frame, a field section
/// we cannot decode: RFC 9114 §7.1, §4.1.2; RFC 9204 §2.2.3), counted as
/// *malformed*.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H3Error {
    Protocol(u64),
}

impl From<stoa_h3::Error> for H3Error {
    fn from(e: stoa_h3::Error) -> H3Error {
        H3Error::Protocol(e.code.value())
    }
}

/// A connection's QPACK decoding state: no dynamic table (we allowed
/// none), and the fields of the last section.
pub struct Qpack {
    dec: Decoder,
    fields: Fields,
}

impl Default for Qpack {
    fn default() -> Qpack {
        Qpack {
            dec: Decoder::new(0, 0),
            fields: Fields::new(),
        }
    }
}

/// The response read from one request stream.
#[derive(Debug)]
pub struct Response {
    /// The final status (0 until its HEADERS).
    pub status: u16,
    /// DATA payload bytes.
    pub body: u64,
    /// Bytes of the stream, frames included.
    pub wire: u64,
    /// The `server` field, when asked for.
    pub server: Option<Vec<u8>>,
    reader: RequestReader,
    /// Bytes of a frame not complete yet (a head, or a HEADERS payload).
    partial: Vec<u8>,
}

impl Default for Response {
    fn default() -> Response {
        Response {
            status: 0,
            body: 0,
            wire: 0,
            server: None,
            reader: RequestReader::client(MAX_FIELD_SECTION as u64),
            partial: Vec::new(),
        }
    }
}

impl Response {
    /// Takes bytes of stream `stream`.
    pub fn feed(
        &mut self,
        data: &[u8],
        stream: u64,
        want_server: bool,
        qpack: &mut Qpack,
    ) -> Result<(), H3Error> {
        self.wire += data.len() as u64;
        if self.partial.is_empty() {
            let used = self.frames(data, stream, want_server, qpack)?;
            self.partial.extend_from_slice(&data[used..]);
        } else {
            let mut buf = std::mem::take(&mut self.partial);
            buf.extend_from_slice(data);
            let used = self.frames(&buf, stream, want_server, qpack);
            buf.drain(..*used.as_ref().unwrap_or(&0));
            self.partial = buf;
            used?;
        }
        Ok(())
    }

    /// Reads the events at the start of `buf`; returns the bytes used.
    fn frames(
        &mut self,
        buf: &[u8],
        stream: u64,
        want_server: bool,
        qpack: &mut Qpack,
    ) -> Result<usize, H3Error> {
        let mut pos = 0;
        loop {
            let step = self.reader.next(&buf[pos..])?;
            let at = pos;
            pos += step.used;
            match step.event {
                Some(Event::Data(r)) => self.body += r.len() as u64,
                Some(Event::Headers(r)) => {
                    let section = &buf[at + r.start..at + r.end];
                    let decoded =
                        qpack
                            .dec
                            .decode(stream, section, MAX_FIELD_SECTION, &mut qpack.fields);
                    match decoded {
                        Ok(Decoded::Done) => {}
                        // Blocked needs a dynamic table we never allowed.
                        _ => {
                            return Err(H3Error::Protocol(
                                stoa_h3::Code::QpackDecompressionFailed.value(),
                            ))
                        }
                    }
                    let status = stoa_h3::response_status(&qpack.fields)?;
                    // Interim responses (1xx) precede the final one.
                    if self.status == 0 && !(100..200).contains(&status) {
                        self.status = status;
                        if want_server {
                            self.server = qpack
                                .fields
                                .iter()
                                .find(|(n, _)| *n == b"server")
                                .map(|(_, v)| v.to_vec());
                        }
                    }
                }
                // Trailers: their fields are not looked at.
                Some(Event::Trailers(_)) => {}
                None if step.used == 0 => return Ok(pos),
                None => {}
            }
            if pos == buf.len() {
                return Ok(pos);
            }
        }
    }

    /// The stream ended (FIN): whether the response was whole (a final
    /// status, and no frame cut short: RFC 9114 §4.1, §7.1).
    pub fn complete(&self) -> bool {
        self.status != 0 && self.reader.finish(self.partial.len()).is_ok()
    }
}

/// The server's control stream (§6.2.1): read for GOAWAY (§5.2), the rest
/// is skipped. The stream type has been taken.
#[derive(Debug, Default)]
pub struct Control {
    partial: Vec<u8>,
    skip: u64,
    pub goaway: bool,
}

impl Control {
    pub fn feed(&mut self, mut data: &[u8]) {
        let n = self.skip.min(data.len() as u64) as usize;
        self.skip -= n as u64;
        data = &data[n..];
        self.partial.extend_from_slice(data);
        while let Some((kind, len, head)) = frame::parse_header(&self.partial) {
            if kind == frame::GOAWAY {
                self.goaway = true;
            }
            let have = (self.partial.len() - head) as u64;
            if have >= len {
                self.partial.drain(..head + len as usize);
            } else {
                // The rest of this frame is skipped as it comes.
                self.skip = len - have;
                self.partial.clear();
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        frame::put_frame(&mut out, kind, payload);
        out
    }

    #[test]
    fn a_request_becomes_headers_with_pseudo_fields_first_and_a_data_frame_for_its_body() {
        // RFC 9114 §4.3.1 (pseudo-headers, :authority from Host), §4.2
        // (lowercase names, no connection-specific fields), §4.1 (HEADERS,
        // then DATA); read back with the server's own reader and decoder.
        let h1 = b"POST /f?x=1 HTTP/1.1\r\nHost: h:8443\r\nUser-Agent: b\r\nConnection: keep-alive\r\nX-Y: z\r\nContent-Length: 3\r\n\r\nabc";
        let r = H3Request::from_h1(h1, 3, "https").expect("converts");
        let mut reader = RequestReader::server(1 << 16);
        let step = reader.next(&r.wire).expect("a frame");
        let Some(Event::Headers(range)) = step.event else {
            panic!("HEADERS first: {step:?}");
        };
        let mut fields = Fields::new();
        Decoder::new(0, 0)
            .decode(0, &r.wire[range], 1 << 16, &mut fields)
            .expect("decodes");
        let req = stoa_h3::Request::from_fields(fields).expect("a valid request");
        assert_eq!(req.method(), b"POST");
        assert_eq!(req.scheme(), Some(&b"https"[..]));
        assert_eq!(req.authority(), Some(&b"h:8443"[..]));
        assert_eq!(req.path(), Some(&b"/f?x=1"[..]));
        let rest: Vec<(Vec<u8>, Vec<u8>)> = req
            .fields()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> =
            [("user-agent", "b"), ("x-y", "z"), ("content-length", "3")]
                .iter()
                .map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec()))
                .collect();
        assert_eq!(rest, want);
        let body = &r.wire[step.used..];
        assert_eq!(body, [0x00, 0x03, b'a', b'b', b'c']);
    }

    fn section(status: u16, server: Option<&[u8]>) -> Vec<u8> {
        let mut s = Vec::new();
        Encoder::prefix(&mut s);
        Encoder::status(&mut s, status);
        if let Some(v) = server {
            Encoder::field(&mut s, b"server", v);
        }
        s
    }

    #[test]
    fn a_response_split_anywhere_gives_its_status_server_and_body_length() {
        // An unknown frame type is skipped (RFC 9114 §9); two DATA frames.
        let mut wire = frame(frame::HEADERS, &section(200, Some(b"stoa")));
        wire.extend(frame(0x21, b"reserved"));
        wire.extend(frame(frame::DATA, b"hello"));
        wire.extend(frame(frame::DATA, &[7u8; 300]));
        for cut in 0..wire.len() {
            let mut r = Response::default();
            let mut q = Qpack::default();
            r.feed(&wire[..cut], 0, true, &mut q).expect("first part");
            r.feed(&wire[cut..], 0, true, &mut q).expect("second part");
            assert_eq!((r.status, r.body), (200, 305), "cut {cut}");
            assert_eq!(r.server.as_deref(), Some(&b"stoa"[..]), "cut {cut}");
            assert!(r.complete());
        }
    }

    #[test]
    fn an_interim_response_then_a_literal_status_and_trailers_are_read() {
        // 103 then 201 (not in the static table: a literal), a body, then
        // trailers (RFC 9114 §4.1).
        let mut wire = frame(frame::HEADERS, &section(103, None));
        wire.extend(frame(frame::HEADERS, &section(201, None)));
        wire.extend(frame(frame::DATA, b"x"));
        let mut t = Vec::new();
        Encoder::prefix(&mut t);
        Encoder::field(&mut t, b"x-t", b"1");
        wire.extend(frame(frame::HEADERS, &t));
        let mut r = Response::default();
        r.feed(&wire, 0, false, &mut Qpack::default())
            .expect("reads");
        assert_eq!((r.status, r.body), (201, 1));
        assert!(r.complete());
    }

    #[test]
    fn a_cut_frame_is_incomplete_and_a_control_frame_on_a_request_stream_is_refused() {
        // §7.1: a stream that ends inside a frame is malformed; §7.2.4:
        // SETTINGS on a request stream is H3_FRAME_UNEXPECTED; RFC 9204
        // §2.2.3: a dynamic reference we never allowed fails decoding.
        let mut wire = frame(frame::HEADERS, &section(200, None));
        wire.extend(frame(frame::DATA, b"hello"));
        let mut r = Response::default();
        r.feed(&wire[..wire.len() - 1], 0, false, &mut Qpack::default())
            .expect("reads");
        assert!(!r.complete());
        let mut r = Response::default();
        let e = r.feed(
            &frame(frame::SETTINGS, &[]),
            0,
            false,
            &mut Qpack::default(),
        );
        assert_eq!(e, Err(H3Error::Protocol(0x105)));
        let mut r = Response::default();
        let e = r.feed(
            &frame(frame::HEADERS, &[1, 0, 0x80]),
            0,
            false,
            &mut Qpack::default(),
        );
        assert_eq!(e, Err(H3Error::Protocol(0x200)));
    }

    #[test]
    fn the_control_stream_opens_with_settings_and_a_goaway_from_the_server_is_seen() {
        // RFC 9114 §6.2.1: the first frame of a control stream is SETTINGS.
        let c = control_stream();
        assert_eq!(c[0], 0x00);
        let (kind, len, head) = frame::parse_header(&c[1..]).expect("a frame");
        assert_eq!(kind, frame::SETTINGS);
        let s = Settings::parse(&c[1 + head..1 + head + len as usize]).expect("SETTINGS");
        assert_eq!(s.qpack_max_table_capacity, 0);
        assert_eq!(s.max_field_section_size, Some(MAX_FIELD_SECTION as u64));
        let mut ctl = Control::default();
        let mut wire = frame(frame::SETTINGS, &[0x06, 0x44, 0x00]);
        wire.extend(frame(frame::GOAWAY, &[0x08]));
        for b in wire.chunks(1) {
            ctl.feed(b);
        }
        assert!(ctl.goaway);
    }
}
