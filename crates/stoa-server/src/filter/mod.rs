//! Response filters: what changes every handler's responses on their way
//! to the client.

pub(crate) mod error_pages;
pub(crate) mod headers;
