//! HTTP semantics used by handlers (pure functions, no I/O).
//!
//! Everything here works on bytes and numbers the caller already has, so it
//! can be tested with byte vectors and reused by any handler regardless of
//! the HTTP version that carries the request.

pub mod autoindex;
pub mod client_cert;
pub mod conditional;
pub mod path;
pub mod range;

/// The host name from a Host header, without its port (case is kept;
/// matching ignores it). Invalid or absent hosts select the first site.
pub fn host_name(h: Option<&[u8]>) -> &str {
    let Some(h) = h else { return "" };
    let h = match h.iter().rposition(|&b| b == b':') {
        Some(i) if !h[i..].contains(&b']') => &h[..i],
        _ => h,
    };
    std::str::from_utf8(h).unwrap_or("")
}
