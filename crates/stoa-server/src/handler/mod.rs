//! Handlers: each answers a request through an
//! [`Exchange`](crate::exchange::Exchange) and knows nothing of the
//! connection or HTTP version carrying it. They import the exchange, the
//! gateway and upstream layers and `http`; never the connection loops,
//! `proto`, routing, the config loader, or one another.
//!
//! This module, [`configure`] (what configurators share) and [`php`] (the
//! preset that composes FastCGI and static files) are the handler layer
//! itself: [`Handler`] is the one enum of handlers routing dispatches on.

pub mod cgi;
pub(crate) mod configure;
pub mod fastcgi;
pub mod lua;
pub(crate) mod php;
pub mod proxy;
pub(crate) mod proxy_rules;
pub(crate) mod redirect;
pub(crate) mod respond;
pub mod ssi;
pub mod static_files;
pub mod status;
pub(crate) mod template;

use std::sync::Arc;

/// A route's handler, configured (each variant's type lives with its
/// handler, and so does its configurator: `configure::Configure`).
// Those that answer at once first, then those that run as a future:
// `runs_async` is then one comparison.
#[derive(Debug)]
pub(crate) enum Handler {
    Static(Arc<static_files::StaticConfig>),
    /// The status page.
    Status(Arc<status::StatusConfig>),
    /// The PHP preset: FastCGI for scripts, static for other files
    /// (routing picks which).
    Php(Arc<php::PhpRoute>),
    /// `deny = true`: 403.
    Deny,
    /// A redirect from a template.
    Redirect(Arc<redirect::RedirectConfig>),
    /// A fixed answer.
    Respond(Arc<respond::RespondConfig>),
    Cgi(Arc<cgi::CgiConfig>),
    FastCgi(Arc<fastcgi::FastCgiRoute>),
    Proxy(Arc<proxy::ProxyRoute>),
    /// Pages parsed for server-side includes.
    Ssi(Arc<ssi::SsiConfig>),
    /// A Lua script.
    Lua(Arc<lua::LuaConfig>),
}

impl Handler {
    /// Whether it runs as a future (it waits on something) or answers at
    /// once (static files, the status page, 403).
    pub(crate) fn runs_async(&self) -> bool {
        matches!(
            self,
            Handler::Cgi(_)
                | Handler::FastCgi(_)
                | Handler::Proxy(_)
                | Handler::Ssi(_)
                | Handler::Lua(_)
        )
    }
}

/// `deny = true`: 403 for everything the route's matcher takes.
pub(crate) struct Deny;

impl configure::Configure for Deny {
    fn configure(&self, _: &configure::Ctx<'_>) -> Result<Handler, configure::Fail> {
        Ok(Handler::Deny)
    }
}

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
