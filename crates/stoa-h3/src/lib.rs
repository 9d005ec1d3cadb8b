//! A sans-IO HTTP/3 codec (RFC 9114) with QPACK (RFC 9204): varints,
//! frames and their readers, SETTINGS, unidirectional stream types,
//! field sections with a bounded dynamic table, and the checks a request
//! or response must pass. No QUIC here: the caller moves bytes between
//! these types and its QUIC streams (stoa-server does it with quinn), so
//! everything is tested on byte vectors, as `stoa-h2` is.
//!
//! A server reading a request stream:
//!
//! ```
//! use stoa_h3::{frame, qpack, Event, Request, RequestReader};
//!
//! // HEADERS: a GET of https://a/ with static entries only.
//! let mut section = Vec::new();
//! qpack::Encoder::prefix(&mut section);
//! qpack::Encoder::request(&mut section, b"GET", b"https", b"a", b"/");
//! let mut wire = Vec::new();
//! frame::put_frame(&mut wire, frame::HEADERS, &section);
//!
//! let mut reader = RequestReader::server(16 << 10);
//! let mut decoder = qpack::Decoder::new(4096, 16);
//! let step = reader.next(&wire).expect("a well-formed frame");
//! let Some(Event::Headers(range)) = step.event else { panic!("HEADERS") };
//! let mut fields = qpack::Fields::new();
//! decoder.decode(0, &wire[range], 16 << 10, &mut fields).expect("decoded");
//! let req = Request::from_fields(fields).expect("a valid request");
//! assert_eq!(req.path(), Some(&b"/"[..]));
//! reader.finish(wire.len() - step.used).expect("a complete request");
//! ```

mod error;
pub mod frame;
pub mod qpack;
mod request;
pub mod varint;

pub use error::{Code, Error, Scope};
pub use frame::{
    Control, ControlReader, Event, RequestReader, Settings, Step, UniKind, UniStreams,
};
pub use request::{check_trailers, response_status, BodyLength, Request};
