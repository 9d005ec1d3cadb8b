//! Sans-IO server-side includes in Apache `mod_include` syntax, so that
//! existing `.shtml` pages work unchanged.
//!
//! - [`parser`]: a streaming parser. Page bytes go in as they are read;
//!   text comes out borrowed, directives (`<!--#element attr="value" -->`)
//!   parsed. Memory is bounded by the longest directive allowed, never by
//!   the page.
//! - [`Page`]: the interpreter. It keeps the `if`/`elif`/`else`/`endif`
//!   state, the variables and the `config` settings, evaluates the legacy
//!   expression language ([`expr`]), and returns [`Action`]s: write this
//!   text, include this URL or file, look up this file's size or date, run
//!   this command. The server does the I/O and reports failures back.
//! - [`format`]: `strftime` (`timefmt`), `apr_strfsize` (`sizefmt`), and
//!   the `echo` encodings (entity, url, urlencoded, base64).
//!
//! One page, as the server drives it:
//!
//! ```
//! use stoa_ssi::{Action, Page, Settings, Times, VarList};
//!
//! let mut env = VarList::new();
//! env.set(b"DOCUMENT_URI", b"/index.shtml");
//! let mut page = Page::new(Settings::default(), Times::default());
//! let mut out = Vec::new();
//! let chunks: [&[u8]; 2] = [b"<p><!--#echo var=\"DOCUMENT_", b"URI\" --> <!--#include virtual=\"/f\" --></p>"];
//! for chunk in chunks {
//!     let mut input = chunk;
//!     while let Some(action) = page.next(&mut input, &env) {
//!         match action {
//!             Action::Text(t) => out.extend_from_slice(t),
//!             Action::Output(v) => out.extend_from_slice(&v),
//!             // The server runs the subrequest here and writes its
//!             // output before asking for the next action; on failure
//!             // it calls page.failed(reason).
//!             Action::Include(_) => out.extend_from_slice(b"[footer]"),
//!             Action::Error { errmsg, .. } => out.extend_from_slice(&errmsg),
//!             _ => {}
//!         }
//!     }
//! }
//! page.finish();
//! while let Some(action) = page.next(&mut &[][..], &env) {
//!     if let Action::Text(t) = action {
//!         out.extend_from_slice(t);
//!     }
//! }
//! assert_eq!(out, b"<p>/index.shtml [footer]</p>");
//! ```

pub mod expr;
pub mod format;
pub mod fuzzing;
mod page;
pub mod parser;

pub use expr::Backrefs;
pub use format::Zone;
pub use page::{
    Action, Env, ExecKind, FileStat, InfoKind, Page, Settings, SizeFmt, Source, Template, Times,
    VarList, DEFAULT_ECHOMSG, DEFAULT_ERRMSG,
};
pub use parser::{Arg, Directive, Event, Malformed, Parser};
