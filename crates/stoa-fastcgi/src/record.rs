//! Records: the header, the body of every record type, the incremental
//! decoder and the encoders (§3.3, §4, §5, §8).
//!
//! A record is an 8-byte header (version, type, request id, content length,
//! padding length, reserved) followed by `content_length` bytes of content
//! and `padding_length` bytes of padding. Content is at most 65535 bytes, so
//! the decoder never holds more than one record.

use crate::nv;
use crate::Error;

/// FCGI_VERSION_1, the only version (§8).
pub const VERSION_1: u8 = 1;
/// FCGI_HEADER_LEN (§8).
pub const HEADER_LEN: usize = 8;
/// The largest content of one record: the 16-bit content length (§3.3).
pub const MAX_CONTENT_LEN: usize = 0xffff;
/// The content the encoder puts in each record of a long stream: the largest
/// multiple of 8 that fits, so that only a stream's last record needs padding.
pub const MAX_STREAM_CHUNK: usize = 0xfff8;
/// FCGI_NULL_REQUEST_ID: management records carry it (§3.3).
pub const NULL_REQUEST_ID: u16 = 0;
/// FCGI_KEEP_CONN, the flag of FCGI_BEGIN_REQUEST (§5.1).
pub const KEEP_CONN: u8 = 1;
/// FCGI_LISTENSOCK_FILENO: the listening socket of an application started by
/// the web server (§2.2).
pub const LISTENSOCK_FILENO: i32 = 0;
/// FCGI_GET_VALUES variables (§4.1).
pub const MAX_CONNS: &str = "FCGI_MAX_CONNS";
pub const MAX_REQS: &str = "FCGI_MAX_REQS";
pub const MPXS_CONNS: &str = "FCGI_MPXS_CONNS";

/// A record type (§8). Values outside 1..=11 are kept as `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordType {
    BeginRequest,
    AbortRequest,
    EndRequest,
    Params,
    Stdin,
    Stdout,
    Stderr,
    Data,
    GetValues,
    GetValuesResult,
    UnknownType,
    Other(u8),
}

impl RecordType {
    pub fn from_u8(b: u8) -> RecordType {
        match b {
            1 => RecordType::BeginRequest,
            2 => RecordType::AbortRequest,
            3 => RecordType::EndRequest,
            4 => RecordType::Params,
            5 => RecordType::Stdin,
            6 => RecordType::Stdout,
            7 => RecordType::Stderr,
            8 => RecordType::Data,
            9 => RecordType::GetValues,
            10 => RecordType::GetValuesResult,
            11 => RecordType::UnknownType,
            other => RecordType::Other(other),
        }
    }

    pub fn as_u8(self) -> u8 {
        match self {
            RecordType::BeginRequest => 1,
            RecordType::AbortRequest => 2,
            RecordType::EndRequest => 3,
            RecordType::Params => 4,
            RecordType::Stdin => 5,
            RecordType::Stdout => 6,
            RecordType::Stderr => 7,
            RecordType::Data => 8,
            RecordType::GetValues => 9,
            RecordType::GetValuesResult => 10,
            RecordType::UnknownType => 11,
            RecordType::Other(b) => b,
        }
    }

    /// The content length a record of this type must have, for the types
    /// whose body is a fixed structure.
    pub fn fixed_len(self) -> Option<u16> {
        match self {
            RecordType::BeginRequest | RecordType::EndRequest | RecordType::UnknownType => Some(8),
            RecordType::AbortRequest => Some(0),
            _ => None,
        }
    }

    /// Stream types: a record with no content ends the stream (§3.3).
    pub fn is_stream(self) -> bool {
        matches!(
            self,
            RecordType::Params
                | RecordType::Stdin
                | RecordType::Stdout
                | RecordType::Stderr
                | RecordType::Data
        )
    }
}

/// The role of a request (§5.1, §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Responder,
    Authorizer,
    Filter,
    Other(u16),
}

impl Role {
    pub fn from_u16(v: u16) -> Role {
        match v {
            1 => Role::Responder,
            2 => Role::Authorizer,
            3 => Role::Filter,
            other => Role::Other(other),
        }
    }

    pub fn as_u16(self) -> u16 {
        match self {
            Role::Responder => 1,
            Role::Authorizer => 2,
            Role::Filter => 3,
            Role::Other(v) => v,
        }
    }
}

/// The protocol status of FCGI_END_REQUEST (§5.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolStatus {
    /// Normal end of the request.
    RequestComplete,
    /// The application serves one request at a time per connection and was
    /// sent a second one.
    CantMpxConn,
    /// The application is out of a resource (e.g. database connections).
    Overloaded,
    /// The application does not implement the requested role.
    UnknownRole,
    Other(u8),
}

impl ProtocolStatus {
    pub fn from_u8(b: u8) -> ProtocolStatus {
        match b {
            0 => ProtocolStatus::RequestComplete,
            1 => ProtocolStatus::CantMpxConn,
            2 => ProtocolStatus::Overloaded,
            3 => ProtocolStatus::UnknownRole,
            other => ProtocolStatus::Other(other),
        }
    }

    pub fn as_u8(self) -> u8 {
        match self {
            ProtocolStatus::RequestComplete => 0,
            ProtocolStatus::CantMpxConn => 1,
            ProtocolStatus::Overloaded => 2,
            ProtocolStatus::UnknownRole => 3,
            ProtocolStatus::Other(b) => b,
        }
    }
}

/// A record header (§3.3). The version is always 1 and the reserved byte is
/// ignored on input and zero on output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub record_type: RecordType,
    pub request_id: u16,
    pub content_length: u16,
    pub padding_length: u8,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let [id1, id0] = self.request_id.to_be_bytes();
        let [len1, len0] = self.content_length.to_be_bytes();
        [
            VERSION_1,
            self.record_type.as_u8(),
            id1,
            id0,
            len1,
            len0,
            self.padding_length,
            0,
        ]
    }

    /// Decodes a header, refusing a version other than 1 and a fixed-size
    /// body of the wrong length (so that a bad record is refused before its
    /// body is waited for).
    pub fn decode(b: [u8; HEADER_LEN]) -> Result<Header, Error> {
        if b[0] != VERSION_1 {
            return Err(Error::Version(b[0]));
        }
        let h = Header {
            record_type: RecordType::from_u8(b[1]),
            request_id: u16::from_be_bytes([b[2], b[3]]),
            content_length: u16::from_be_bytes([b[4], b[5]]),
            padding_length: b[6],
        };
        match h.record_type.fixed_len() {
            Some(n) if n != h.content_length => Err(Error::BodyLength {
                record_type: b[1],
                length: h.content_length,
            }),
            _ => Ok(h),
        }
    }

    /// Header, content and padding.
    pub fn record_len(&self) -> usize {
        HEADER_LEN + usize::from(self.content_length) + usize::from(self.padding_length)
    }
}

/// A decoded record; stream and pair contents borrow the input or the
/// decoder's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub request_id: u16,
    pub body: Body<'a>,
}

/// The body of a record, by type (§4, §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// §5.1. `flags & KEEP_CONN` asks the application to keep the
    /// connection open after the request.
    BeginRequest {
        role: Role,
        flags: u8,
    },
    /// §5.4.
    AbortRequest,
    /// §5.5.
    EndRequest {
        app_status: u32,
        protocol_status: ProtocolStatus,
    },
    /// §5.2: name-value pairs, possibly split anywhere across records.
    Params(&'a [u8]),
    /// §5.3 byte streams; empty content ends the stream.
    Stdin(&'a [u8]),
    Stdout(&'a [u8]),
    Stderr(&'a [u8]),
    Data(&'a [u8]),
    /// §4.1: name-value pairs with empty values, in one record.
    GetValues(&'a [u8]),
    /// §4.1: the answer, in one record.
    GetValuesResult(&'a [u8]),
    /// §4.2: the type the application did not understand.
    UnknownType(u8),
    /// A type this implementation does not know.
    Other {
        record_type: u8,
        content: &'a [u8],
    },
}

impl Body<'_> {
    pub fn record_type(&self) -> RecordType {
        match self {
            Body::BeginRequest { .. } => RecordType::BeginRequest,
            Body::AbortRequest => RecordType::AbortRequest,
            Body::EndRequest { .. } => RecordType::EndRequest,
            Body::Params(_) => RecordType::Params,
            Body::Stdin(_) => RecordType::Stdin,
            Body::Stdout(_) => RecordType::Stdout,
            Body::Stderr(_) => RecordType::Stderr,
            Body::Data(_) => RecordType::Data,
            Body::GetValues(_) => RecordType::GetValues,
            Body::GetValuesResult(_) => RecordType::GetValuesResult,
            Body::UnknownType(_) => RecordType::UnknownType,
            Body::Other { record_type, .. } => RecordType::from_u8(*record_type),
        }
    }
}

impl<'a> Record<'a> {
    /// Builds a record from its header and content (without padding).
    pub fn from_parts(header: &Header, content: &'a [u8]) -> Result<Record<'a>, Error> {
        let bad_len = || Error::BodyLength {
            record_type: header.record_type.as_u8(),
            length: u16::try_from(content.len()).unwrap_or(u16::MAX),
        };
        let fixed = |n: usize| -> Result<&'a [u8], Error> {
            if content.len() == n {
                Ok(content)
            } else {
                Err(bad_len())
            }
        };
        let body = match header.record_type {
            RecordType::BeginRequest => {
                let b = fixed(8)?;
                Body::BeginRequest {
                    role: Role::from_u16(u16::from_be_bytes([b[0], b[1]])),
                    flags: b[2],
                }
            }
            RecordType::AbortRequest => {
                fixed(0)?;
                Body::AbortRequest
            }
            RecordType::EndRequest => {
                let b = fixed(8)?;
                Body::EndRequest {
                    app_status: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                    protocol_status: ProtocolStatus::from_u8(b[4]),
                }
            }
            RecordType::UnknownType => Body::UnknownType(fixed(8)?[0]),
            RecordType::Params => Body::Params(content),
            RecordType::Stdin => Body::Stdin(content),
            RecordType::Stdout => Body::Stdout(content),
            RecordType::Stderr => Body::Stderr(content),
            RecordType::Data => Body::Data(content),
            RecordType::GetValues => Body::GetValues(content),
            RecordType::GetValuesResult => Body::GetValuesResult(content),
            RecordType::Other(t) => Body::Other {
                record_type: t,
                content,
            },
        };
        Ok(Record {
            request_id: header.request_id,
            body,
        })
    }

    /// Appends the record to `out`, padded to a multiple of 8 bytes.
    /// `ContentTooLong` (and nothing written) when the content does not fit
    /// one record.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        let id = self.request_id;
        match self.body {
            Body::BeginRequest { role, flags } => {
                let [r1, r0] = role.as_u16().to_be_bytes();
                push_raw(
                    out,
                    RecordType::BeginRequest,
                    id,
                    &[r1, r0, flags, 0, 0, 0, 0, 0],
                );
            }
            Body::AbortRequest => push_abort_request(out, id),
            Body::EndRequest {
                app_status,
                protocol_status,
            } => push_end_request(out, id, app_status, protocol_status),
            Body::UnknownType(t) => {
                push_raw(out, RecordType::UnknownType, id, &[t, 0, 0, 0, 0, 0, 0, 0])
            }
            Body::Params(c)
            | Body::Stdin(c)
            | Body::Stdout(c)
            | Body::Stderr(c)
            | Body::Data(c)
            | Body::GetValues(c)
            | Body::GetValuesResult(c)
            | Body::Other { content: c, .. } => {
                push_record(out, self.body.record_type(), id, c)?;
            }
        }
        Ok(())
    }
}

/// Padding that brings `content_len` to a multiple of 8 (§3.3 recommends
/// aligned records).
pub fn padding_for(content_len: usize) -> u8 {
    ((8 - content_len % 8) % 8) as u8
}

/// Appends one record. `ContentTooLong` (and nothing written) past 65535
/// bytes of content.
pub fn push_record(
    out: &mut Vec<u8>,
    record_type: RecordType,
    request_id: u16,
    content: &[u8],
) -> Result<(), Error> {
    if content.len() > MAX_CONTENT_LEN {
        return Err(Error::ContentTooLong);
    }
    push_raw(out, record_type, request_id, content);
    Ok(())
}

/// Appends one record whose content the caller knows fits.
fn push_raw(out: &mut Vec<u8>, record_type: RecordType, request_id: u16, content: &[u8]) {
    debug_assert!(content.len() <= MAX_CONTENT_LEN);
    let content = &content[..content.len().min(MAX_CONTENT_LEN)];
    let padding = padding_for(content.len());
    let h = Header {
        record_type,
        request_id,
        content_length: content.len() as u16,
        padding_length: padding,
    };
    out.reserve(h.record_len());
    out.extend_from_slice(&h.encode());
    out.extend_from_slice(content);
    out.extend_from_slice(&[0u8; 8][..usize::from(padding)]);
}

/// Appends `data` as records of a stream type, each at most
/// [`MAX_STREAM_CHUNK`] bytes. Empty data writes nothing, since an empty
/// record would end the stream: see [`push_stream_end`].
pub fn push_stream(out: &mut Vec<u8>, record_type: RecordType, request_id: u16, data: &[u8]) {
    for chunk in data.chunks(MAX_STREAM_CHUNK) {
        push_raw(out, record_type, request_id, chunk);
    }
}

/// Appends the empty record that ends a stream (§3.3).
pub fn push_stream_end(out: &mut Vec<u8>, record_type: RecordType, request_id: u16) {
    push_raw(out, record_type, request_id, &[]);
}

/// FCGI_BEGIN_REQUEST (§5.1).
pub fn push_begin_request(out: &mut Vec<u8>, request_id: u16, role: Role, keep_conn: bool) {
    Record {
        request_id,
        body: Body::BeginRequest {
            role,
            flags: if keep_conn { KEEP_CONN } else { 0 },
        },
    }
    .encode(out)
    .unwrap_or_default();
}

/// FCGI_ABORT_REQUEST (§5.4).
pub fn push_abort_request(out: &mut Vec<u8>, request_id: u16) {
    push_raw(out, RecordType::AbortRequest, request_id, &[]);
}

/// FCGI_END_REQUEST (§5.5).
pub fn push_end_request(
    out: &mut Vec<u8>,
    request_id: u16,
    app_status: u32,
    protocol_status: ProtocolStatus,
) {
    let [a3, a2, a1, a0] = app_status.to_be_bytes();
    push_raw(
        out,
        RecordType::EndRequest,
        request_id,
        &[a3, a2, a1, a0, protocol_status.as_u8(), 0, 0, 0],
    );
}

/// FCGI_UNKNOWN_TYPE, the answer to a management record of type
/// `record_type` the application does not understand (§4.2).
pub fn push_unknown_type(out: &mut Vec<u8>, record_type: u8) {
    Record {
        request_id: NULL_REQUEST_ID,
        body: Body::UnknownType(record_type),
    }
    .encode(out)
    .unwrap_or_default();
}

/// FCGI_GET_VALUES asking for `names` (§4.1). `ContentTooLong` (and nothing
/// written) when they do not fit one record.
pub fn push_get_values<N: AsRef<[u8]>>(
    out: &mut Vec<u8>,
    names: impl IntoIterator<Item = N>,
) -> Result<(), Error> {
    let mut content = Vec::new();
    for n in names {
        nv::push_pair(&mut content, n.as_ref(), b"")?;
    }
    push_record(out, RecordType::GetValues, NULL_REQUEST_ID, &content)
}

/// FCGI_GET_VALUES_RESULT (§4.1).
pub fn push_get_values_result<N: AsRef<[u8]>, V: AsRef<[u8]>>(
    out: &mut Vec<u8>,
    pairs: impl IntoIterator<Item = (N, V)>,
) -> Result<(), Error> {
    let mut content = Vec::new();
    for (n, v) in pairs {
        nv::push_pair(&mut content, n.as_ref(), v.as_ref())?;
    }
    push_record(out, RecordType::GetValuesResult, NULL_REQUEST_ID, &content)
}

/// The standard variables of FCGI_GET_VALUES_RESULT (§4.1). A variable the
/// application did not answer, or answered with something that is not a
/// decimal number, is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Values {
    /// FCGI_MAX_CONNS: concurrent transport connections it accepts.
    pub max_conns: Option<u32>,
    /// FCGI_MAX_REQS: concurrent requests it accepts (over all connections).
    pub max_reqs: Option<u32>,
    /// FCGI_MPXS_CONNS: whether it multiplexes requests on a connection.
    pub mpxs_conns: Option<bool>,
}

impl Values {
    /// Parses the content of FCGI_GET_VALUES_RESULT. Unknown variables are
    /// skipped; pairs running past the record are `BadPairs`.
    pub fn parse(content: &[u8]) -> Result<Values, Error> {
        let mut v = Values::default();
        for pair in nv::pairs(content) {
            let (name, value) = pair?;
            let n = std::str::from_utf8(value)
                .ok()
                .map(str::trim)
                .and_then(|s| s.parse::<u32>().ok());
            if name == MAX_CONNS.as_bytes() {
                v.max_conns = n;
            } else if name == MAX_REQS.as_bytes() {
                v.max_reqs = n;
            } else if name == MPXS_CONNS.as_bytes() {
                v.mpxs_conns = n.map(|n| n != 0);
            }
        }
        Ok(v)
    }
}

/// Decodes records from input split anywhere.
///
/// [`Decoder::decode`] takes at most one record from the front of its input
/// and says how many bytes it consumed. A record wholly inside the input is
/// returned without copying; otherwise its content is gathered in a buffer
/// of at most 65535 bytes. After an error every call returns that error.
#[derive(Debug, Default)]
pub struct Decoder {
    header: [u8; HEADER_LEN],
    /// Bytes of `header` filled.
    have: usize,
    /// Set once the header is complete and valid.
    current: Option<Header>,
    content: Vec<u8>,
    padding_left: usize,
    failed: Option<Error>,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Consumes bytes from the front of `input` up to the end of one record.
    /// Returns the bytes consumed (at least one when `input` is not empty)
    /// and the record if one was completed.
    pub fn decode<'a>(&'a mut self, input: &'a [u8]) -> Result<(usize, Option<Record<'a>>), Error> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        // A whole record in the input: nothing to copy.
        if self.have == 0 {
            if let Some(head) = input.first_chunk::<HEADER_LEN>() {
                let h = match Header::decode(*head) {
                    Ok(h) => h,
                    Err(e) => return Err(self.fail(e)),
                };
                if input.len() >= h.record_len() {
                    let content = &input[HEADER_LEN..HEADER_LEN + usize::from(h.content_length)];
                    return Ok((h.record_len(), Some(Record::from_parts(&h, content)?)));
                }
            }
        }
        let mut pos = 0;
        let h = match self.current {
            Some(h) => h,
            None => {
                let take = (HEADER_LEN - self.have).min(input.len());
                self.header[self.have..self.have + take].copy_from_slice(&input[..take]);
                self.have += take;
                pos += take;
                if self.have < HEADER_LEN {
                    return Ok((pos, None));
                }
                let h = match Header::decode(self.header) {
                    Ok(h) => h,
                    Err(e) => return Err(self.fail(e)),
                };
                self.current = Some(h);
                self.content.clear();
                self.padding_left = usize::from(h.padding_length);
                h
            }
        };
        let len = usize::from(h.content_length);
        let take = (len - self.content.len()).min(input.len() - pos);
        self.content.extend_from_slice(&input[pos..pos + take]);
        pos += take;
        if self.content.len() < len {
            return Ok((pos, None));
        }
        let skip = self.padding_left.min(input.len() - pos);
        self.padding_left -= skip;
        pos += skip;
        if self.padding_left > 0 {
            return Ok((pos, None));
        }
        self.current = None;
        self.have = 0;
        Ok((pos, Some(Record::from_parts(&h, &self.content)?)))
    }

    fn fail(&mut self, e: Error) -> Error {
        self.failed = Some(e);
        e
    }

    /// True between records: the input may end here.
    pub fn is_idle(&self) -> bool {
        self.have == 0 && self.failed.is_none()
    }

    /// What the end of the input means: `Truncated` inside a record.
    pub fn finish(&self) -> Result<(), Error> {
        match self.failed {
            Some(e) => Err(e),
            None if self.have != 0 => Err(Error::Truncated),
            None => Ok(()),
        }
    }

    /// Bytes held for an incomplete record (header and content).
    pub fn buffered(&self) -> usize {
        self.have
            + if self.current.is_some() {
                self.content.len()
            } else {
                0
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
        let mut d = Decoder::new();
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < input.len() {
            let (n, rec) = d.decode(&input[pos..])?;
            assert!(n > 0);
            pos += n;
            if let Some(r) = rec {
                let mut e = Vec::new();
                r.encode(&mut e).unwrap();
                out.push(e);
            }
        }
        d.finish()?;
        Ok(out)
    }

    fn one(input: &[u8]) -> Record<'_> {
        let h = Header::decode(*input.first_chunk().unwrap()).unwrap();
        assert_eq!(input.len(), h.record_len());
        Record::from_parts(&h, &input[8..8 + usize::from(h.content_length)]).unwrap()
    }

    #[test]
    fn a_header_is_version_type_id_length_padding_reserved_spec_3_3() {
        let h = Header {
            record_type: RecordType::Stdout,
            request_id: 0x1234,
            content_length: 0xabcd,
            padding_length: 3,
        };
        assert_eq!(h.encode(), [1, 6, 0x12, 0x34, 0xab, 0xcd, 3, 0]);
        assert_eq!(Header::decode(h.encode()), Ok(h));
        // The reserved byte is ignored on input.
        assert_eq!(
            Header::decode([1, 6, 0x12, 0x34, 0xab, 0xcd, 3, 0xff]),
            Ok(h)
        );
    }

    #[test]
    fn a_begin_request_is_role_flags_and_five_reserved_bytes_spec_5_1() {
        let mut out = Vec::new();
        push_begin_request(&mut out, 1, Role::Responder, true);
        assert_eq!(out, [1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0]);
        assert_eq!(
            one(&out),
            Record {
                request_id: 1,
                body: Body::BeginRequest {
                    role: Role::Responder,
                    flags: KEEP_CONN
                }
            }
        );
        out.clear();
        push_begin_request(&mut out, 0x0102, Role::Filter, false);
        assert_eq!(&out[..11], [1, 1, 1, 2, 0, 8, 0, 0, 0, 3, 0]);
    }

    #[test]
    fn an_end_request_is_app_status_and_protocol_status_spec_5_5() {
        let mut out = Vec::new();
        push_end_request(&mut out, 7, 0x0102_0304, ProtocolStatus::Overloaded);
        assert_eq!(out, [1, 3, 0, 7, 0, 8, 0, 0, 1, 2, 3, 4, 2, 0, 0, 0]);
        for (status, byte) in [
            (ProtocolStatus::RequestComplete, 0),
            (ProtocolStatus::CantMpxConn, 1),
            (ProtocolStatus::Overloaded, 2),
            (ProtocolStatus::UnknownRole, 3),
            (ProtocolStatus::Other(200), 200),
        ] {
            out.clear();
            push_end_request(&mut out, 7, 9, status);
            assert_eq!(out[12], byte);
            assert_eq!(
                one(&out).body,
                Body::EndRequest {
                    app_status: 9,
                    protocol_status: status
                }
            );
        }
    }

    #[test]
    fn every_record_type_round_trips_spec_8() {
        let bodies = [
            Body::BeginRequest {
                role: Role::Authorizer,
                flags: 0,
            },
            Body::BeginRequest {
                role: Role::Other(0xbeef),
                flags: 0xff,
            },
            Body::AbortRequest,
            Body::EndRequest {
                app_status: u32::MAX,
                protocol_status: ProtocolStatus::UnknownRole,
            },
            Body::Params(b"\x04\x03HOST"),
            Body::Stdin(b"hello"),
            Body::Stdin(b""),
            Body::Stdout(b"Status: 200\r\n\r\n"),
            Body::Stderr(b"oops"),
            Body::Data(b"12345678"),
            Body::GetValues(b"\x0e\x00FCGI_MAX_CONNS"),
            Body::GetValuesResult(b"\x0e\x01FCGI_MAX_CONNS1"),
            Body::UnknownType(200),
            Body::Other {
                record_type: 42,
                content: b"x",
            },
        ];
        for body in bodies {
            let rec = Record {
                request_id: if matches!(
                    body,
                    Body::GetValues(_) | Body::GetValuesResult(_) | Body::UnknownType(_)
                ) {
                    0
                } else {
                    3
                },
                body,
            };
            let mut out = Vec::new();
            rec.encode(&mut out).unwrap();
            assert_eq!(out.len() % 8, 0, "{body:?} is padded to 8 bytes");
            assert_eq!(one(&out), rec);
            let mut d = Decoder::new();
            let (n, got) = d.decode(&out).unwrap();
            assert_eq!((n, got), (out.len(), Some(rec)));
        }
    }

    #[test]
    fn a_decoder_gives_the_same_records_for_every_split_spec_3_3() {
        let mut wire = Vec::new();
        push_begin_request(&mut wire, 1, Role::Responder, true);
        push_stream(&mut wire, RecordType::Params, 1, b"\x03\x01abcd");
        push_stream_end(&mut wire, RecordType::Params, 1);
        push_stream(&mut wire, RecordType::Stdin, 1, b"hello world");
        push_end_request(&mut wire, 1, 0, ProtocolStatus::RequestComplete);
        // Big padding, no content: handled, not an error.
        wire.extend_from_slice(&[1, 6, 0, 1, 0, 0, 255, 0]);
        wire.extend_from_slice(&[0; 255]);
        wire.extend_from_slice(&[1, 6, 0, 1, 0, 2, 255, 0, b'h', b'i']);
        wire.extend_from_slice(&[7; 255]);
        let whole = decode_all(&wire).unwrap();
        assert_eq!(whole.len(), 7);
        for cut in 0..=wire.len() {
            let mut d = Decoder::new();
            let mut got = Vec::new();
            for part in [&wire[..cut], &wire[cut..]] {
                let mut pos = 0;
                while pos < part.len() {
                    let (n, rec) = d.decode(&part[pos..]).unwrap();
                    assert!(n > 0);
                    pos += n;
                    if let Some(r) = rec {
                        let mut e = Vec::new();
                        r.encode(&mut e).unwrap();
                        got.push(e);
                    }
                    assert!(d.buffered() <= HEADER_LEN + MAX_CONTENT_LEN);
                }
            }
            assert!(d.is_idle());
            assert_eq!(got, whole, "cut at {cut}");
        }
        // One byte at a time.
        let mut d = Decoder::new();
        let mut got = 0;
        for b in &wire {
            let (n, rec) = d.decode(std::slice::from_ref(b)).unwrap();
            assert_eq!(n, 1);
            got += usize::from(rec.is_some());
        }
        assert_eq!(got, 7);
    }

    #[test]
    fn a_wrong_version_is_refused_and_the_decoder_stays_failed_spec_3_3() {
        let wire = [2, 6, 0, 1, 0, 0, 0, 0];
        assert_eq!(decode_all(&wire), Err(Error::Version(2)));
        let mut d = Decoder::new();
        assert_eq!(d.decode(&wire[..3]).map(|(n, _)| n), Ok(3));
        assert_eq!(d.decode(&wire[3..]).err(), Some(Error::Version(2)));
        assert_eq!(
            d.decode(&[1, 6, 0, 1, 0, 0, 0, 0]).err(),
            Some(Error::Version(2))
        );
        assert_eq!(d.finish(), Err(Error::Version(2)));
        assert_eq!(decode_all(&[0; 8]), Err(Error::Version(0)));
    }

    #[test]
    fn a_begin_request_with_a_short_body_is_malformed_spec_5_1() {
        let wire = [1, 1, 0, 1, 0, 4, 4, 0, 0, 1, 1, 0, 0, 0, 0, 0];
        assert_eq!(
            decode_all(&wire),
            Err(Error::BodyLength {
                record_type: 1,
                length: 4
            })
        );
        // Refused from the header alone, before the body arrives.
        let mut d = Decoder::new();
        assert!(d.decode(&wire[..8]).is_err());
        // END_REQUEST and UNKNOWN_TYPE are 8 bytes, ABORT_REQUEST empty.
        assert!(decode_all(&[1, 3, 0, 1, 0, 9, 7, 0]).is_err());
        assert!(decode_all(&[1, 11, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(decode_all(&[1, 2, 0, 1, 0, 1, 7, 0]).is_err());
        let h = Header {
            record_type: RecordType::BeginRequest,
            request_id: 1,
            content_length: 8,
            padding_length: 0,
        };
        assert!(Record::from_parts(&h, &[0; 7]).is_err());
    }

    #[test]
    fn truncated_records_are_incomplete_until_the_input_ends() {
        let mut wire = Vec::new();
        push_get_values(&mut wire, [MAX_CONNS, MAX_REQS, MPXS_CONNS]).unwrap();
        for cut in 1..wire.len() {
            let mut d = Decoder::new();
            let (n, rec) = d.decode(&wire[..cut]).unwrap();
            assert_eq!((n, rec), (cut, None));
            assert!(!d.is_idle());
            assert_eq!(d.finish(), Err(Error::Truncated), "cut {cut}");
        }
    }

    #[test]
    fn a_content_length_larger_than_the_input_waits_and_buffers_at_most_one_record() {
        // 65535 bytes of content announced, 100 given.
        let mut wire = vec![1, 6, 0, 1, 0xff, 0xff, 0, 0];
        wire.extend_from_slice(&[b'x'; 100]);
        let mut d = Decoder::new();
        assert_eq!(d.decode(&wire).unwrap(), (108, None));
        assert_eq!(d.buffered(), 108);
        let rest = vec![b'y'; 70000];
        let (n, rec) = d.decode(&rest).unwrap();
        assert_eq!(n, 65535 - 100);
        match rec {
            Some(Record {
                body: Body::Stdout(c),
                ..
            }) => assert_eq!(c.len(), 65535),
            other => panic!("{other:?}"),
        }
        assert!(d.is_idle());
    }

    #[test]
    fn long_streams_are_split_into_aligned_records_of_at_most_65535_bytes() {
        let data = vec![5u8; 200_000];
        let mut out = Vec::new();
        push_stream(&mut out, RecordType::Stdin, 9, &data);
        push_stream_end(&mut out, RecordType::Stdin, 9);
        let mut d = Decoder::new();
        let mut pos = 0;
        let mut got = Vec::new();
        let mut records = 0;
        while pos < out.len() {
            let (n, rec) = d.decode(&out[pos..]).unwrap();
            pos += n;
            if let Some(Record {
                request_id: 9,
                body: Body::Stdin(c),
            }) = rec
            {
                assert!(c.len() <= MAX_CONTENT_LEN);
                records += 1;
                got.extend_from_slice(c);
            }
        }
        assert_eq!(got, data);
        assert_eq!(records, 5); // 4 records of data + the empty one
        assert_eq!(out.len() % 8, 0);
        let mut empty = Vec::new();
        push_stream(&mut empty, RecordType::Stdin, 9, b"");
        assert!(empty.is_empty());
    }

    #[test]
    fn oversized_content_cannot_be_encoded_in_one_record() {
        let big = vec![0u8; MAX_CONTENT_LEN + 1];
        let mut out = Vec::new();
        assert_eq!(
            push_record(&mut out, RecordType::Stdout, 1, &big),
            Err(Error::ContentTooLong)
        );
        assert!(out.is_empty());
        assert!(push_record(&mut out, RecordType::Stdout, 1, &big[1..]).is_ok());
        assert_eq!(out.len(), 8 + 65535 + 1);
    }

    #[test]
    fn get_values_results_are_parsed_into_values_spec_4_1() {
        let mut out = Vec::new();
        push_get_values_result(
            &mut out,
            [
                (MAX_CONNS, "10"),
                (MAX_REQS, "50"),
                (MPXS_CONNS, "1"),
                ("X_OTHER", "y"),
            ],
        )
        .unwrap();
        let Body::GetValuesResult(c) = one(&out).body else {
            panic!()
        };
        assert_eq!(
            Values::parse(c),
            Ok(Values {
                max_conns: Some(10),
                max_reqs: Some(50),
                mpxs_conns: Some(true)
            })
        );
        assert_eq!(
            Values::parse(b"\x0f\x01FCGI_MPXS_CONNS0\x0d\x03FCGI_MAX_REQSabc"),
            Ok(Values {
                max_conns: None,
                max_reqs: None,
                mpxs_conns: Some(false)
            })
        );
        // A pair running past the end of the record (§3.4).
        assert_eq!(
            Values::parse(b"\x0e\x05FCGI_MAX_CONNS1"),
            Err(Error::BadPairs)
        );
    }

    #[test]
    fn unknown_types_are_kept_and_answered_with_unknown_type_spec_4_2() {
        let wire = [1, 99, 0, 0, 0, 3, 5, 0, b'a', b'b', b'c', 0, 0, 0, 0, 0];
        let rec = one(&wire);
        assert_eq!(
            rec.body,
            Body::Other {
                record_type: 99,
                content: b"abc"
            }
        );
        assert_eq!(rec.body.record_type(), RecordType::Other(99));
        let mut out = Vec::new();
        push_unknown_type(&mut out, 99);
        assert_eq!(out, [1, 11, 0, 0, 0, 8, 0, 0, 99, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn constants_match_the_specification_spec_8() {
        for b in 0..=255u8 {
            assert_eq!(RecordType::from_u8(b).as_u8(), b);
            assert_eq!(ProtocolStatus::from_u8(b).as_u8(), b);
        }
        for v in [0u16, 1, 2, 3, 4, 0xffff] {
            assert_eq!(Role::from_u16(v).as_u16(), v);
        }
        assert_eq!(RecordType::UnknownType.as_u8(), 11);
        assert_eq!(Role::Filter.as_u16(), 3);
        assert_eq!(padding_for(0), 0);
        assert_eq!(padding_for(1), 7);
        assert_eq!(padding_for(8), 0);
        assert_eq!(MAX_STREAM_CHUNK % 8, 0);
    }
}
