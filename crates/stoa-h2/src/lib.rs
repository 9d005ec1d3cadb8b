//! A sans-IO HTTP/2 server codec: bytes from the socket go in, events
//! (requests, body data, resets) and bytes for the socket come out. No
//! runtime, no locks, no task per stream: the caller owns the connection
//! and drives it from one task. Tested on byte vectors, like `stoa-h1`.
//!
//! Why not the `h2` crate: see docs/BENCHMARKS.md, "HTTP/2 profile".
//!
//! One turn of a server's loop:
//!
//! ```
//! use bytes::BytesMut;
//! use stoa_h2::{frame, hpack::Encoder, Config, Conn, Event};
//!
//! let mut conn = Conn::new(&Config::default());
//! // What the client sent: the preface, SETTINGS, a GET (RFC 7541
//! // static table: GET, http, `/`; `:authority` a literal).
//! let mut input = BytesMut::from(&frame::PREFACE[..]);
//! let mut wire = Vec::new();
//! frame::put_frame(&mut wire, frame::SETTINGS, 0, 0, &[]);
//! let get = [0x82, 0x86, 0x84, 0x01, 1, b'a'];
//! frame::put_frame(&mut wire, frame::HEADERS, frame::END_HEADERS | frame::END_STREAM, 1, &get);
//! input.extend_from_slice(&wire);
//!
//! conn.recv(&mut input).expect("no connection error");
//! while let Some(event) = conn.next_event() {
//!     if let Event::Request { id, head, .. } = event {
//!         assert_eq!(head.path(), Some(&b"/"[..]));
//!         let mut block = Vec::new();
//!         Encoder::status(&mut block, 200);
//!         Encoder::field(&mut block, b"content-type", b"text/plain");
//!         conn.send_headers(id, &block, false);
//!         conn.send_data(id, b"hello", true);
//!     }
//! }
//! // Our SETTINGS, the ACK of the client's, HEADERS, DATA: to the socket.
//! let n = conn.output().len();
//! assert!(n > 0);
//! conn.consume_output(n);
//! assert_eq!(conn.open_streams(), 0);
//! ```

mod conn;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod hpack;
mod request;

pub use conn::{Config, Conn, ConnError, Event, OUTPUT_HIGH};
pub use frame::Reason;
pub use request::Request;
