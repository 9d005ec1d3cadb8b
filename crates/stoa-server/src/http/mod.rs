//! HTTP semantics used by handlers (pure functions, no I/O).
//!
//! Everything here works on bytes and numbers the caller already has, so it
//! can be tested with byte vectors and reused by any handler regardless of
//! the HTTP version that carries the request.

pub mod autoindex;
pub mod conditional;
pub mod path;
pub mod range;
