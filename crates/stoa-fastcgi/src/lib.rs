//! Sans-IO FastCGI 1.0 (the Open Market specification of 29 April 1996).
//!
//! - [`record`]: the record header and bodies of every record type (§3.3,
//!   §4, §5, §8), the incremental [`Decoder`] (any split of the input, never
//!   more than one record buffered) and the encoders (streams split into
//!   records of at most 65535 bytes, padded to 8-byte alignment).
//! - [`nv`]: name-value pairs (§3.4): encoding, whole-buffer parsing and the
//!   incremental [`PairDecoder`] for a PARAMS stream split across records.
//! - [`gateway`]: the web server's side of one transport connection:
//!   request-id allocation, several concurrent requests (multiplexing),
//!   FCGI_ABORT_REQUEST, FCGI_GET_VALUES, and the application's records turned
//!   into [`gateway::Event`]s per request.
//! - [`app`]: the application's side, to write FastCGI applications in Rust:
//!   a sans-IO core ([`app::Connection`]) and a blocking std-only driver
//!   ([`app::blocking`]) that accepts on the listening socket passed as fd 0.
//!
//! Nothing outside [`app::blocking`] touches a socket: callers feed input
//! bytes in and take output bytes from a `Vec<u8>` they own.
//!
//! Section numbers in comments and test names refer to the specification.

#![forbid(unsafe_code)]

pub mod app;
pub mod gateway;
pub mod nv;
pub mod record;

#[doc(hidden)]
pub mod fuzzing;

pub use nv::PairDecoder;
pub use record::{
    Body, Decoder, Header, ProtocolStatus, Record, RecordType, Role, Values, HEADER_LEN,
    MAX_CONTENT_LEN,
};

use std::fmt;

/// Why bytes could not be decoded or a request could not be sent.
///
/// Decoding errors (`Version`, `BodyLength`, `BadPairs`, `Truncated`) mean the
/// peer broke the protocol: the connection cannot be used any further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// A record whose version is not FCGI_VERSION_1 (§3.3, §8).
    Version(u8),
    /// A fixed-size body of another length: BEGIN_REQUEST, END_REQUEST and
    /// UNKNOWN_TYPE have 8 bytes, ABORT_REQUEST none (§4.2, §5.1, §5.4, §5.5).
    BodyLength { record_type: u8, length: u16 },
    /// The input ended inside a record or a name-value pair.
    Truncated,
    /// Name-value pairs that run past the end of their record or stream
    /// (§3.4).
    BadPairs,
    /// Name-value pairs past the configured limit.
    TooLarge,
    /// A name or value longer than 2^31 - 1 bytes, which §3.4 cannot encode.
    PairTooLong,
    /// More than 65535 bytes of content for one record (§3.3).
    ContentTooLong,
    /// No request can start: as many are active as allowed, or every request
    /// id is taken.
    Busy,
    /// The id names no active request of this connection.
    UnknownRequest(u16),
    /// The stream (FCGI_STDIN or FCGI_DATA) of this request has already ended.
    StreamEnded(u16),
    /// The connection takes no new request: one was started without
    /// FCGI_KEEP_CONN, so the application closes it after that one (§3.5),
    /// or the input has ended.
    Closing,
}

impl Error {
    /// True when the peer sent something the protocol does not allow.
    pub fn is_protocol(&self) -> bool {
        matches!(
            self,
            Error::Version(_)
                | Error::BodyLength { .. }
                | Error::Truncated
                | Error::BadPairs
                | Error::TooLarge
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Version(v) => write!(f, "FastCGI record with version {v}, not 1"),
            Error::BodyLength {
                record_type,
                length,
            } => write!(
                f,
                "FastCGI record of type {record_type} with a body of {length} bytes"
            ),
            Error::Truncated => f.write_str("FastCGI input ended inside a record"),
            Error::BadPairs => f.write_str("malformed FastCGI name-value pairs"),
            Error::TooLarge => f.write_str("FastCGI name-value pairs over the limit"),
            Error::PairTooLong => f.write_str("FastCGI name or value longer than 2^31-1 bytes"),
            Error::ContentTooLong => f.write_str("FastCGI record content over 65535 bytes"),
            Error::Busy => f.write_str("no FastCGI request id available"),
            Error::UnknownRequest(id) => write!(f, "no active FastCGI request {id}"),
            Error::StreamEnded(id) => write!(f, "FastCGI request {id}: stream already ended"),
            Error::Closing => f.write_str("FastCGI connection is closing"),
        }
    }
}

impl std::error::Error for Error {}
