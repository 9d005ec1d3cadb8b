//! Handlers: each answers a request through an
//! [`Exchange`](crate::exchange::Exchange) and knows nothing of the
//! connection or HTTP version carrying it. They import the exchange, the
//! gateway and upstream layers and `http`; never the connection loops,
//! `proto`, routing, the config loader, or one another.

pub mod cgi;
pub mod fastcgi;
pub mod lua;
pub mod proxy;
pub mod redirect;
pub mod respond;
pub mod ssi;
pub mod static_files;
pub mod status;
pub(crate) mod template;

/// How an asynchronous handler ended.
#[derive(Debug)]
pub enum Outcome {
    /// The response was written (or the client is gone).
    Done,
    /// Route this target again (origin-form, with its query), as a GET:
    /// a local redirect (RFC 3875 §6.2.2).
    Redirect(Vec<u8>),
}

/// What an access check decided (a FastCGI Authorizer, a Lua `access`
/// script).
pub enum Authz {
    /// Go on to the route's handler, with these variables for it
    /// (environment variables of CGI, FastCGI and SSI; `req.vars` in Lua).
    Allow(Vec<(String, Vec<u8>)>),
    /// A response was sent to the client (or it is gone).
    Answered,
}
