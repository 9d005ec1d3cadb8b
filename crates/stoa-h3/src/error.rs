//! HTTP/3 and QPACK error codes (RFC 9114 §8.1, RFC 9204 §6) and the
//! error type every parser here returns.

/// An application error code, as sent in CONNECTION_CLOSE, RESET_STREAM
/// and STOP_SENDING.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Code {
    NoError = 0x100,
    GeneralProtocolError = 0x101,
    InternalError = 0x102,
    StreamCreationError = 0x103,
    ClosedCriticalStream = 0x104,
    FrameUnexpected = 0x105,
    FrameError = 0x106,
    ExcessiveLoad = 0x107,
    IdError = 0x108,
    SettingsError = 0x109,
    MissingSettings = 0x10a,
    RequestRejected = 0x10b,
    RequestCancelled = 0x10c,
    RequestIncomplete = 0x10d,
    MessageError = 0x10e,
    ConnectError = 0x10f,
    VersionFallback = 0x110,
    QpackDecompressionFailed = 0x200,
    QpackEncoderStreamError = 0x201,
    QpackDecoderStreamError = 0x202,
}

impl Code {
    /// The code's value on the wire.
    pub fn value(self) -> u64 {
        self as u64
    }
}

/// Whether an error ends the connection or only its stream (RFC 9114 §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// CONNECTION_CLOSE with the code.
    Connection,
    /// RESET_STREAM / STOP_SENDING on the stream with the code.
    Stream,
}

/// A protocol error: its code, its scope, and what broke (for logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error {
    pub code: Code,
    pub scope: Scope,
    pub why: &'static str,
}

impl Error {
    /// A connection error.
    pub fn conn(code: Code, why: &'static str) -> Error {
        Error {
            code,
            scope: Scope::Connection,
            why,
        }
    }

    /// A stream error.
    pub fn stream(code: Code, why: &'static str) -> Error {
        Error {
            code,
            scope: Scope::Stream,
            why,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} ({:?}): {}", self.code, self.scope, self.why)
    }
}

impl std::error::Error for Error {}
