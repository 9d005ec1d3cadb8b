//! HTTP/3 frames (RFC 9114 §7), SETTINGS (§7.2.4), unidirectional stream
//! types (§6.2), and the two readers a connection needs: one for request
//! streams (HEADERS, DATA, trailers) and one for the peer's control
//! stream. The readers are sans-IO: they look at the bytes the caller
//! holds and say how many they used, so DATA payloads are handed out in
//! place, never copied.

use crate::error::{Code, Error};
use crate::varint;

pub const DATA: u64 = 0x00;
pub const HEADERS: u64 = 0x01;
pub const CANCEL_PUSH: u64 = 0x03;
pub const SETTINGS: u64 = 0x04;
pub const PUSH_PROMISE: u64 = 0x05;
pub const GOAWAY: u64 = 0x07;
pub const MAX_PUSH_ID: u64 = 0x0d;

/// SETTINGS identifiers (RFC 9114 §7.2.4.1, RFC 9204 §5).
pub const SETTINGS_QPACK_MAX_TABLE_CAPACITY: u64 = 0x01;
pub const SETTINGS_MAX_FIELD_SECTION_SIZE: u64 = 0x06;
pub const SETTINGS_QPACK_BLOCKED_STREAMS: u64 = 0x07;

/// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2).
pub const STREAM_CONTROL: u64 = 0x00;
pub const STREAM_PUSH: u64 = 0x01;
pub const STREAM_QPACK_ENCODER: u64 = 0x02;
pub const STREAM_QPACK_DECODER: u64 = 0x03;

/// The largest control frame (SETTINGS, GOAWAY...) buffered whole; a
/// larger one is H3_EXCESSIVE_LOAD (RFC 9114 §7.1 lets an endpoint bound
/// frame sizes). Unknown frames of any size are skipped, not buffered.
pub const MAX_CONTROL_FRAME: u64 = 16 << 10;

/// HTTP/2 frame types that have no HTTP/3 meaning: receiving one is
/// H3_FRAME_UNEXPECTED (RFC 9114 §7.2.8).
fn http2_only(ty: u64) -> bool {
    matches!(ty, 0x02 | 0x06 | 0x08 | 0x09)
}

/// Reserved ("grease") types 0x1f * N + 0x21, which carry no meaning
/// (RFC 9114 §7.2.8): ignored like every unknown type.
pub fn is_reserved(ty: u64) -> bool {
    ty >= 0x21 && (ty - 0x21).is_multiple_of(0x1f)
}

/// Appends a frame header: type and payload length.
pub fn put_header(out: &mut Vec<u8>, ty: u64, len: u64) {
    varint::encode(out, ty);
    varint::encode(out, len);
}

/// Appends a whole frame.
pub fn put_frame(out: &mut Vec<u8>, ty: u64, payload: &[u8]) {
    put_header(out, ty, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// Appends a GOAWAY frame carrying `id` (RFC 9114 §5.2: the first request
/// stream id not processed).
pub fn put_goaway(out: &mut Vec<u8>, id: u64) {
    put_header(out, GOAWAY, varint::len(id) as u64);
    varint::encode(out, id);
}

/// The frame header at the start of `buf`: (type, payload length, header
/// length), or None until the whole header is there.
pub fn parse_header(buf: &[u8]) -> Option<(u64, u64, usize)> {
    let (ty, a) = varint::decode(buf)?;
    let (len, b) = varint::decode(&buf[a..])?;
    Some((ty, len, a + b))
}

/// The settings an endpoint announces; absent ones take their defaults
/// (RFC 9114 §7.2.4.1: no limit on field sections; RFC 9204 §5: a
/// dynamic table of 0 and no blocked streams).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Settings {
    pub qpack_max_table_capacity: u64,
    pub max_field_section_size: Option<u64>,
    pub qpack_blocked_streams: u64,
}

impl Settings {
    /// Parses a SETTINGS payload. A duplicate identifier or an HTTP/2 one
    /// (0x02 to 0x05) is H3_SETTINGS_ERROR (§7.2.4, §7.2.4.1); unknown
    /// ones are ignored; a payload cut inside a varint is H3_FRAME_ERROR.
    pub fn parse(mut payload: &[u8]) -> Result<Settings, Error> {
        let mut s = Settings::default();
        let mut seen = [false; 3];
        // Unknown ids seen, to refuse their duplicates too: few fit.
        let mut others: Vec<u64> = Vec::new();
        while !payload.is_empty() {
            let bad = || Error::conn(Code::FrameError, "SETTINGS payload cut in a varint");
            let (id, a) = varint::decode(payload).ok_or_else(bad)?;
            let (value, b) = varint::decode(&payload[a..]).ok_or_else(bad)?;
            payload = &payload[a + b..];
            let dup = || Error::conn(Code::SettingsError, "a setting sent twice");
            let slot = match id {
                SETTINGS_QPACK_MAX_TABLE_CAPACITY => 0,
                SETTINGS_MAX_FIELD_SECTION_SIZE => 1,
                SETTINGS_QPACK_BLOCKED_STREAMS => 2,
                0x02..=0x05 => {
                    return Err(Error::conn(Code::SettingsError, "an HTTP/2 setting"));
                }
                _ => {
                    if others.contains(&id) {
                        return Err(dup());
                    }
                    others.push(id);
                    continue;
                }
            };
            if std::mem::replace(&mut seen[slot], true) {
                return Err(dup());
            }
            match slot {
                0 => s.qpack_max_table_capacity = value,
                1 => s.max_field_section_size = Some(value),
                _ => s.qpack_blocked_streams = value,
            }
        }
        Ok(s)
    }

    /// Appends the SETTINGS frame announcing these values (defaults left
    /// out).
    pub fn put_frame(&self, out: &mut Vec<u8>) {
        let mut payload = Vec::new();
        let mut pair = |id, v| {
            varint::encode(&mut payload, id);
            varint::encode(&mut payload, v);
        };
        if self.qpack_max_table_capacity > 0 {
            pair(
                SETTINGS_QPACK_MAX_TABLE_CAPACITY,
                self.qpack_max_table_capacity,
            );
        }
        if let Some(n) = self.max_field_section_size {
            pair(SETTINGS_MAX_FIELD_SECTION_SIZE, n);
        }
        if self.qpack_blocked_streams > 0 {
            pair(SETTINGS_QPACK_BLOCKED_STREAMS, self.qpack_blocked_streams);
        }
        put_frame(out, SETTINGS, &payload);
    }
}

/// What a unidirectional stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UniKind {
    Control,
    Push,
    QpackEncoder,
    QpackDecoder,
    /// Unknown or reserved: the reader abandons it (STOP_SENDING with
    /// H3_STREAM_CREATION_ERROR or just ignoring it, RFC 9114 §6.2).
    Other(u64),
}

/// The peer's critical unidirectional streams seen so far: each of the
/// control, QPACK encoder and QPACK decoder streams may be opened once.
#[derive(Debug, Default)]
pub struct UniStreams {
    control: bool,
    encoder: bool,
    decoder: bool,
}

impl UniStreams {
    /// Classifies a new unidirectional stream of the peer by its type.
    /// `peer_is_client`: a client may not open push streams (RFC 9114
    /// §6.2.2). A second control, encoder or decoder stream is
    /// H3_STREAM_CREATION_ERROR (§6.2.1, RFC 9204 §4.2).
    pub fn open(&mut self, ty: u64, peer_is_client: bool) -> Result<UniKind, Error> {
        let once = |seen: &mut bool, kind| {
            if std::mem::replace(seen, true) {
                Err(Error::conn(
                    Code::StreamCreationError,
                    "a second control or QPACK stream",
                ))
            } else {
                Ok(kind)
            }
        };
        match ty {
            STREAM_CONTROL => once(&mut self.control, UniKind::Control),
            STREAM_QPACK_ENCODER => once(&mut self.encoder, UniKind::QpackEncoder),
            STREAM_QPACK_DECODER => once(&mut self.decoder, UniKind::QpackDecoder),
            STREAM_PUSH if peer_is_client => Err(Error::conn(
                Code::StreamCreationError,
                "a push stream from a client",
            )),
            STREAM_PUSH => Ok(UniKind::Push),
            other => Ok(UniKind::Other(other)),
        }
    }
}

/// What a request stream carried (`RequestReader::next`). Ranges index
/// the buffer given to that call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A whole HEADERS payload that opens the message (a field section to
    /// decode). On a client's reader, every HEADERS before the first DATA
    /// (interim 1xx responses, then the final one).
    Headers(std::ops::Range<usize>),
    /// A piece of a DATA payload.
    Data(std::ops::Range<usize>),
    /// A whole HEADERS payload after the message's body: its trailers.
    Trailers(std::ops::Range<usize>),
}

/// One step of a reader: how many bytes of the buffer it used (to drop
/// before the next call) and what they carried. `used == 0` with no
/// event: more bytes are needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step<E> {
    pub used: usize,
    pub event: Option<E>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Body,
    Trailers,
}

/// Reads the frames of one request stream (a server reading a request,
/// or a client a response).
#[derive(Debug)]
pub struct RequestReader {
    server: bool,
    max_head: u64,
    phase: Phase,
    /// Bytes of a DATA payload not yet handed out.
    data_left: u64,
    /// Bytes of an unknown frame still to skip.
    skip_left: u64,
    seen_data: bool,
}

impl RequestReader {
    /// A server's reader of a request: HEADERS payloads over `max_head`
    /// bytes are refused (the field section would exceed what we
    /// announced, RFC 9114 §4.2.2).
    pub fn server(max_head: u64) -> RequestReader {
        RequestReader {
            server: true,
            max_head,
            phase: Phase::Start,
            data_left: 0,
            skip_left: 0,
            seen_data: false,
        }
    }

    /// A client's reader of a response.
    pub fn client(max_head: u64) -> RequestReader {
        RequestReader {
            server: false,
            ..RequestReader::server(max_head)
        }
    }

    /// Whether the message's head (first HEADERS) has been read.
    pub fn head_seen(&self) -> bool {
        self.phase != Phase::Start
    }

    /// The next event in `buf`. Errors follow RFC 9114 §4.1 and §7.2:
    /// DATA before HEADERS, anything after trailers, control frames,
    /// PUSH_PROMISE from a client and HTTP/2 frame types are
    /// H3_FRAME_UNEXPECTED (connection errors).
    pub fn next(&mut self, buf: &[u8]) -> Result<Step<Event>, Error> {
        if self.data_left > 0 {
            if buf.is_empty() {
                return Ok(Step {
                    used: 0,
                    event: None,
                });
            }
            let n = (buf.len() as u64).min(self.data_left) as usize;
            self.data_left -= n as u64;
            return Ok(Step {
                used: n,
                event: Some(Event::Data(0..n)),
            });
        }
        if self.skip_left > 0 {
            let n = (buf.len() as u64).min(self.skip_left) as usize;
            self.skip_left -= n as u64;
            return Ok(Step {
                used: n,
                event: None,
            });
        }
        let Some((ty, len, hl)) = parse_header(buf) else {
            return Ok(Step {
                used: 0,
                event: None,
            });
        };
        let unexpected = |why| Err(Error::conn(Code::FrameUnexpected, why));
        match ty {
            DATA => {
                if self.phase == Phase::Start {
                    return unexpected("DATA before HEADERS");
                }
                if self.phase == Phase::Trailers {
                    return unexpected("DATA after trailers");
                }
                self.seen_data = true;
                self.data_left = len;
                Ok(Step {
                    used: hl,
                    event: None,
                })
            }
            HEADERS => {
                if self.phase == Phase::Trailers {
                    return unexpected("HEADERS after trailers");
                }
                if len > self.max_head {
                    return Err(Error::stream(
                        Code::ExcessiveLoad,
                        "a field section larger than announced",
                    ));
                }
                let end = hl as u64 + len;
                if (buf.len() as u64) < end {
                    return Ok(Step {
                        used: 0,
                        event: None,
                    });
                }
                let range = hl..end as usize;
                let event = match self.phase {
                    Phase::Start if self.server => {
                        self.phase = Phase::Body;
                        Event::Headers(range)
                    }
                    Phase::Start | Phase::Body if !self.server && !self.seen_data => {
                        self.phase = Phase::Body;
                        Event::Headers(range)
                    }
                    _ => {
                        self.phase = Phase::Trailers;
                        Event::Trailers(range)
                    }
                };
                Ok(Step {
                    used: end as usize,
                    event: Some(event),
                })
            }
            CANCEL_PUSH | SETTINGS | GOAWAY | MAX_PUSH_ID => {
                unexpected("a control frame on a request stream")
            }
            PUSH_PROMISE if self.server => unexpected("PUSH_PROMISE from a client"),
            PUSH_PROMISE => Err(Error::conn(
                Code::IdError,
                "PUSH_PROMISE without MAX_PUSH_ID",
            )),
            t if http2_only(t) => unexpected("an HTTP/2 frame type"),
            _ => {
                self.skip_left = len;
                Ok(Step {
                    used: hl,
                    event: None,
                })
            }
        }
    }

    /// The stream ended (FIN) after the bytes read so far, `left` of them
    /// unread. A frame cut by the end is H3_FRAME_ERROR (§7.1); a request
    /// without HEADERS is H3_REQUEST_INCOMPLETE (§4.1).
    pub fn finish(&self, left: usize) -> Result<(), Error> {
        if left > 0 || self.data_left > 0 || self.skip_left > 0 {
            return Err(Error::conn(
                Code::FrameError,
                "a frame cut by the stream's end",
            ));
        }
        if self.phase == Phase::Start {
            return Err(Error::stream(
                Code::RequestIncomplete,
                "the stream ended before its HEADERS",
            ));
        }
        Ok(())
    }
}

/// What the peer's control stream carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Settings(Settings),
    Goaway(u64),
    MaxPushId(u64),
    CancelPush(u64),
}

/// Reads the peer's control stream (after its type byte).
#[derive(Debug)]
pub struct ControlReader {
    server: bool,
    settings_seen: bool,
    skip_left: u64,
}

impl ControlReader {
    /// `server`: whether we are the server (a server may receive
    /// MAX_PUSH_ID, a client may not, §7.2.7).
    pub fn new(server: bool) -> ControlReader {
        ControlReader {
            server,
            settings_seen: false,
            skip_left: 0,
        }
    }

    /// The next frame in `buf`. SETTINGS must come first
    /// (H3_MISSING_SETTINGS) and once (H3_FRAME_UNEXPECTED, §7.2.4);
    /// DATA, HEADERS, PUSH_PROMISE and HTTP/2 types are
    /// H3_FRAME_UNEXPECTED; a GOAWAY, MAX_PUSH_ID or CANCEL_PUSH payload
    /// that is not exactly one varint is H3_FRAME_ERROR.
    pub fn next(&mut self, buf: &[u8]) -> Result<Step<Control>, Error> {
        if self.skip_left > 0 {
            let n = (buf.len() as u64).min(self.skip_left) as usize;
            self.skip_left -= n as u64;
            return Ok(Step {
                used: n,
                event: None,
            });
        }
        let Some((ty, len, hl)) = parse_header(buf) else {
            return Ok(Step {
                used: 0,
                event: None,
            });
        };
        if !self.settings_seen && ty != SETTINGS {
            return Err(Error::conn(
                Code::MissingSettings,
                "the control stream does not start with SETTINGS",
            ));
        }
        let unexpected = |why| Err(Error::conn(Code::FrameUnexpected, why));
        let known = matches!(ty, SETTINGS | GOAWAY | MAX_PUSH_ID | CANCEL_PUSH);
        match ty {
            DATA | HEADERS | PUSH_PROMISE => {
                return unexpected("a request frame on the control stream")
            }
            SETTINGS if self.settings_seen => return unexpected("a second SETTINGS"),
            MAX_PUSH_ID if !self.server => return unexpected("MAX_PUSH_ID from a server"),
            t if http2_only(t) => return unexpected("an HTTP/2 frame type"),
            _ if !known => {
                self.skip_left = len;
                return Ok(Step {
                    used: hl,
                    event: None,
                });
            }
            _ => {}
        }
        if len > MAX_CONTROL_FRAME {
            return Err(Error::conn(
                Code::ExcessiveLoad,
                "a control frame too large",
            ));
        }
        let end = hl + len as usize;
        let Some(payload) = buf.get(hl..end) else {
            return Ok(Step {
                used: 0,
                event: None,
            });
        };
        let event = if ty == SETTINGS {
            self.settings_seen = true;
            Control::Settings(Settings::parse(payload)?)
        } else {
            let id = match varint::decode(payload) {
                Some((id, n)) if n == payload.len() => id,
                _ => {
                    return Err(Error::conn(
                        Code::FrameError,
                        "a GOAWAY, MAX_PUSH_ID or CANCEL_PUSH not one varint",
                    ))
                }
            };
            match ty {
                GOAWAY => Control::Goaway(id),
                MAX_PUSH_ID => Control::MaxPushId(id),
                _ => Control::CancelPush(id),
            }
        };
        Ok(Step {
            used: end,
            event: Some(event),
        })
    }
}
