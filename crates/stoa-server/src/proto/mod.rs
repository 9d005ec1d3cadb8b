//! The wire side of a request: what HTTP/1 (and later HTTP/2) need to carry
//! an exchange — socket and buffers, body framing, 100-continue, the output
//! queue. Handlers never see this module; they speak to
//! [`crate::exchange::Exchange`].

pub(crate) mod body;
pub mod h1;
pub mod h2;
pub mod h3;
pub mod output;
pub mod settle;
pub mod stream;
pub mod tls;

use std::time::Duration;

/// Bodies nobody asked for (a POST to a static file) are read and dropped
/// up to this size: on HTTP/1 to keep the connection (past it the
/// connection closes), on HTTP/2 to let the stream end as the client
/// meant it to (past it the stream is reset with NO_ERROR).
pub(crate) const MAX_DISCARD: u64 = 1 << 20;

/// Why a request body could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFail {
    /// Larger than `max_body_bytes` (413).
    TooLarge,
    /// Bad chunked framing (400).
    Malformed,
    /// The client went away.
    Gone,
    /// The client sent too slowly (408).
    Slow,
    /// The body could not be kept (a temporary file failed: 500).
    Spool,
}

/// Validated limits, in the units the code uses.
#[derive(Debug, Clone)]
pub struct Limits {
    pub header_timeout: Duration,
    pub keepalive_timeout: Duration,
    pub send_timeout: Duration,
    /// A request body gets this long, plus a second per `body_min_rate`
    /// bytes received (Apache mod_reqtimeout's `body=20,MinRate=500`).
    pub body_timeout: Duration,
    pub body_min_rate: u64,
    pub shutdown_timeout: Duration,
    pub max_header_bytes: usize,
    pub max_uri_bytes: usize,
    pub max_body_bytes: u64,
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(15),
            send_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(20),
            body_min_rate: 500,
            shutdown_timeout: Duration::from_secs(10),
            max_header_bytes: 16 * 1024,
            max_uri_bytes: 8 * 1024,
            max_body_bytes: 16 << 20,
            max_connections: 10_000,
        }
    }
}

/// `[http2]`: the limits of every HTTP/2 connection. The defaults are
/// hyper's server's (h2's where hyper keeps them), plus the control
/// frame budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Http2Limits {
    /// Most streams open at once per connection.
    pub max_concurrent_streams: u32,
    /// Flow-control window per stream: large enough that one stream
    /// fills a fast link.
    pub initial_window_size: u32,
    /// Flow-control window of the whole connection.
    pub initial_connection_window_size: u32,
    /// Largest frame payload the server accepts.
    pub max_frame_size: u32,
    /// Largest header list a request may carry, decoded (also what bounds
    /// an HPACK bomb or a CONTINUATION flood).
    pub max_header_list_size: u32,
    /// Response bytes queued on a connection, not yet written, past which
    /// its handlers wait (and it stops reading) until the client reads.
    pub max_send_buffer: usize,
    /// Streams a client may reset before they are even accepted, at once
    /// (CVE-2023-44487).
    pub max_pending_accept_reset_streams: usize,
    /// Streams this server may reset because of client errors before it
    /// closes the connection.
    pub max_local_error_reset_streams: usize,
    /// PING and SETTINGS frames at once, refilled at a tenth of this per
    /// second (CVE-2019-9512, CVE-2019-9515).
    pub max_control_frames: u32,
}

impl Default for Http2Limits {
    fn default() -> Self {
        Http2Limits {
            max_concurrent_streams: 200,
            initial_window_size: 1 << 20,
            initial_connection_window_size: 1 << 20,
            max_frame_size: 16 << 10,
            max_header_list_size: 16 << 10,
            max_send_buffer: 400 << 10,
            max_pending_accept_reset_streams: 20,
            max_local_error_reset_streams: 1024,
            max_control_frames: 1000,
        }
    }
}
