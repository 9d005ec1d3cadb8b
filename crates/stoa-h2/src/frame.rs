//! Frame layout (RFC 9113 §4.1) and the constants of §6, §7 and §6.5.2.

/// The length of a frame header.
pub const HEAD_LEN: usize = 9;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Frame types (RFC 9113 §6).
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

// Flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

// Settings (RFC 9113 §6.5.2, RFC 8441 §3).
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;
pub const SETTINGS_ENABLE_CONNECT_PROTOCOL: u16 = 0x8;

/// The largest flow-control window (RFC 9113 §6.9.1).
pub const MAX_WINDOW: i64 = (1 << 31) - 1;
/// The window every stream and the connection start with (RFC 9113 §6.9.2).
pub const DEFAULT_WINDOW: u32 = 65_535;
/// SETTINGS_MAX_FRAME_SIZE's initial value and lower bound (RFC 9113 §6.5.2).
pub const MIN_MAX_FRAME_SIZE: u32 = 16_384;
/// SETTINGS_MAX_FRAME_SIZE's upper bound (RFC 9113 §6.5.2).
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;

/// An error code (RFC 9113 §7), for RST_STREAM and GOAWAY.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reason(pub u32);

impl Reason {
    pub const NO_ERROR: Reason = Reason(0x0);
    pub const PROTOCOL_ERROR: Reason = Reason(0x1);
    pub const INTERNAL_ERROR: Reason = Reason(0x2);
    pub const FLOW_CONTROL_ERROR: Reason = Reason(0x3);
    pub const SETTINGS_TIMEOUT: Reason = Reason(0x4);
    pub const STREAM_CLOSED: Reason = Reason(0x5);
    pub const FRAME_SIZE_ERROR: Reason = Reason(0x6);
    pub const REFUSED_STREAM: Reason = Reason(0x7);
    pub const CANCEL: Reason = Reason(0x8);
    pub const COMPRESSION_ERROR: Reason = Reason(0x9);
    pub const CONNECT_ERROR: Reason = Reason(0xa);
    pub const ENHANCE_YOUR_CALM: Reason = Reason(0xb);
    pub const INADEQUATE_SECURITY: Reason = Reason(0xc);
    pub const HTTP_1_1_REQUIRED: Reason = Reason(0xd);

    /// The code's name in RFC 9113 §7, or "UNKNOWN".
    pub fn name(self) -> &'static str {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        NAMES.get(self.0 as usize).copied().unwrap_or("UNKNOWN")
    }
}

impl std::fmt::Debug for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({:#x})", self.name(), self.0)
    }
}

/// A frame header (RFC 9113 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    /// The stream identifier, its reserved bit cleared.
    pub stream: u32,
}

impl Head {
    pub fn parse(b: &[u8; HEAD_LEN]) -> Head {
        Head {
            len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }
}

/// Appends a frame header.
pub fn put_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let l = (len as u32).to_be_bytes();
    let s = (stream & 0x7fff_ffff).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]);
}

/// Appends a whole frame.
pub fn put_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    put_head(out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
}

pub fn put_rst(out: &mut Vec<u8>, stream: u32, code: Reason) {
    put_frame(out, RST_STREAM, 0, stream, &code.0.to_be_bytes());
}

pub fn put_window_update(out: &mut Vec<u8>, stream: u32, inc: u32) {
    put_frame(
        out,
        WINDOW_UPDATE,
        0,
        stream,
        &(inc & 0x7fff_ffff).to_be_bytes(),
    );
}

pub fn put_goaway(out: &mut Vec<u8>, last: u32, code: Reason) {
    let mut p = [0; 8];
    p[..4].copy_from_slice(&(last & 0x7fff_ffff).to_be_bytes());
    p[4..].copy_from_slice(&code.0.to_be_bytes());
    put_frame(out, GOAWAY, 0, 0, &p);
}

/// A big-endian u32 from the first four bytes of `b` (which has them).
pub fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_header_round_trips_and_the_reserved_bit_is_ignored() {
        // RFC 9113 §4.1: the R bit "MUST be ignored when receiving".
        let mut out = Vec::new();
        put_head(&mut out, 0x01_02_03, HEADERS, END_HEADERS, 5);
        assert_eq!(out, [1, 2, 3, 1, 4, 0, 0, 0, 5]);
        out[5] |= 0x80;
        let h = Head::parse(out[..9].try_into().unwrap());
        assert_eq!(
            h,
            Head {
                len: 0x01_02_03,
                kind: HEADERS,
                flags: END_HEADERS,
                stream: 5
            }
        );
    }

    #[test]
    fn error_codes_have_their_rfc_names() {
        assert_eq!(Reason::ENHANCE_YOUR_CALM.name(), "ENHANCE_YOUR_CALM");
        assert_eq!(Reason(0x99).name(), "UNKNOWN");
    }
}
