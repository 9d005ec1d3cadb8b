//! A sans-IO HTTP/2 server codec: bytes from the socket go in, events
//! (requests, body data, resets) and bytes for the socket come out. No
//! runtime, no locks, no task per stream: the caller owns the connection
//! and drives it from one task. Tested on byte vectors, like `stoa-h1`.
//!
//! Why not the `h2` crate: see docs/BENCHMARKS.md, "HTTP/2 profile".

mod conn;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod hpack;
mod request;

pub use conn::{Config, Conn, ConnError, Event, OUTPUT_HIGH};
pub use frame::Reason;
pub use request::Request;
