//! Response filters: what stands between a handler's response and its
//! carrier (an HTTP/1 connection, an HTTP/2 stream, a subrequest), for
//! every handler alike — nginx's header and body filter chains, h2o's
//! filters.
//!
//! A filter sees the head once it is complete ([`Filter::head`]): the
//! status, the header fields as an editable block ([`Fields`]), the
//! body's length as the handler announced it. It may edit the fields
//! and, by returning a [`BodyFilter`], take the body: then every piece
//! the handler writes passes through it, the application's flushes reach
//! it ([`BodyFilter::flush`]) and the end of the response lets it write
//! its tail ([`BodyFilter::finish`]). A filter that rewrites the body
//! makes its length unknown: the exchange then frames the response as a
//! stream (chunked on HTTP/1.1, unframed on HTTP/2).
//!
//! The list below is the whole registry: one line per filter, in the
//! order they see a head (and a body). It expands to plain structs and
//! calls, so a response pays no virtual call and no box unless a filter
//! takes its body; a route with no filter costs the exchange one test of
//! an `Option` per response call.
//!
//! Adding a filter: a module beside `compress` with its configuration
//! (serde table, validation into its runtime type, documentation), a type
//! implementing [`Filter`], and its line in the `filters!` registry below.

pub(crate) mod compress;
pub(crate) mod error_pages;
mod fields;
pub(crate) mod headers;

pub(crate) use compress::CompressSetting;
pub(crate) use fields::Fields;

use bytes::Bytes;
use std::fs::File;
use stoa_h1::RequestHead;

/// What a filter sees of a response when its head is complete.
pub(crate) struct Head<'h> {
    pub(crate) req: &'h RequestHead,
    pub(crate) status: u16,
    /// The response's header fields (`Name: value\r\n` lines), editable.
    pub(crate) fields: Fields<'h>,
    /// The body as the handler announced it.
    pub(crate) length: Length,
    /// The request is a HEAD: the head is what GET would get, and no
    /// body follows (RFC 9110 §9.3.2).
    pub(crate) head_only: bool,
    /// The client speaks HTTP/1.0 (a streamed body is delimited by
    /// closing the connection).
    pub(crate) http10: bool,
    /// The response is a subrequest's, collected for another response.
    pub(crate) sub: bool,
}

/// A response body as its head announces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Length {
    /// No body (a 204, a 304, a HEAD answered without a length).
    Empty,
    /// This many bytes.
    Known(u64),
    /// Streamed: known at its end.
    Unknown,
}

/// One response filter's configuration, which decides for each response.
pub(crate) trait Filter {
    /// The state of a filter that rewrites a body; [`Never`] for one that
    /// edits heads only.
    type Body: BodyFilter;
    /// Whether it runs on subrequests' responses too. A filter that
    /// rewrites bytes (compression) does not: an included page becomes
    /// part of the including response, which the filter sees whole.
    const IN_SUBREQUESTS: bool;

    /// The head is complete: edit its fields; return the body's state to
    /// rewrite the body (the exchange then streams it).
    fn head(&self, head: &mut Head<'_>) -> Option<Self::Body>;
}

/// A filter at work on one response's body.
pub(crate) trait BodyFilter {
    /// The next piece of the body; what it makes is appended to `out`.
    fn data(&mut self, input: &[u8], out: &mut Vec<u8>);
    /// The application flushed its output (a server-sent event, a
    /// progress line): what is held back goes out now.
    fn flush(&mut self, out: &mut Vec<u8>);
    /// The body is complete: the tail.
    fn finish(&mut self, out: &mut Vec<u8>);
    /// The whole body at once, from a file version the exchange was told
    /// of ([`FileVersion`]): the filter's whole output, when it keeps one
    /// made earlier (or makes one to keep); None to be fed by
    /// [`BodyFilter::data`] as usual.
    fn whole(&mut self, _version: &FileVersion, _body: Whole<'_>) -> Option<Bytes> {
        None
    }
}

/// A whole body, as the static handler has it.
pub(crate) enum Whole<'a> {
    Mem(&'a Bytes),
    File(&'a File),
}

/// A version of a file (what its ETag says): the identity under which a
/// filter may keep what it made of the file's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FileVersion {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) size: u64,
    /// Seconds and nanoseconds.
    pub(crate) mtime: (i64, i64),
}

/// The body state of a filter that has none.
// Used by head-only filters (headers); none is registered yet.
#[allow(dead_code)]
pub(crate) enum Never {}

impl BodyFilter for Never {
    fn data(&mut self, _: &[u8], _: &mut Vec<u8>) {
        match *self {}
    }
    fn flush(&mut self, _: &mut Vec<u8>) {
        match *self {}
    }
    fn finish(&mut self, _: &mut Vec<u8>) {
        match *self {}
    }
}

/// Expands the registry: [`Filters`] (the configuration of a route's
/// filters), [`Active`] (the body filters of one response) and the calls
/// over them, in the registry's order.
macro_rules! filters {
    ($($name:ident: $ty:ty,)*) => {
        /// The filters a route has (the route's value of each, else the
        /// site's), in the order they run.
        #[derive(Debug, Default, Clone)]
        pub(crate) struct Filters {
            $(pub(crate) $name: Option<$ty>,)*
        }

        impl Filters {
            /// Whether no filter is configured (then the exchange gets
            /// none: one test per response call).
            pub(crate) fn is_empty(&self) -> bool {
                true $(&& self.$name.is_none())*
            }

            /// Runs every filter on a complete head; the body filters
            /// that took the body, if any did.
            pub(crate) fn head(&self, h: &mut Head<'_>) -> Option<Box<Active>> {
                let mut a = Active::default();
                let mut any = false;
                $(
                    if let Some(f) = &self.$name {
                        if !h.sub || <$ty as Filter>::IN_SUBREQUESTS {
                            a.$name = f.head(h);
                            if a.$name.is_some() {
                                any = true;
                                h.length = Length::Unknown;
                            }
                        }
                    }
                )*
                any.then(|| Box::new(a))
            }
        }

        /// The body filters of one response, and where their output is
        /// gathered.
        #[derive(Default)]
        pub(crate) struct Active {
            $($name: Option<<$ty as Filter>::Body>,)*
            /// The exchange was told the body is this file version.
            pub(crate) version: Option<FileVersion>,
            /// Some body went through already (a whole-body answer is
            /// only for the first piece).
            pub(crate) fed: bool,
            /// Output gathered for the carrier, reused between pieces.
            pub(crate) out: Vec<u8>,
        }

        impl Active {
            /// A piece of body through every body filter, into `self.out`.
            pub(crate) fn data(&mut self, input: &[u8]) {
                self.fed = true;
                let mut cur: Option<Vec<u8>> = None;
                $(
                    if let Some(b) = self.$name.as_mut() {
                        let mut o = Vec::new();
                        b.data(cur.as_deref().unwrap_or(input), &mut o);
                        cur = Some(o);
                    }
                )*
                self.put(cur, input);
            }

            /// The application's flush through every body filter.
            pub(crate) fn flush(&mut self) {
                let mut cur: Option<Vec<u8>> = None;
                $(
                    if let Some(b) = self.$name.as_mut() {
                        let mut o = Vec::new();
                        if let Some(c) = cur.take() {
                            b.data(&c, &mut o);
                        }
                        b.flush(&mut o);
                        cur = Some(o);
                    }
                )*
                self.put(cur, &[]);
            }

            /// The end of the body through every body filter.
            pub(crate) fn finish(&mut self) {
                let mut cur: Option<Vec<u8>> = None;
                $(
                    if let Some(mut b) = self.$name.take() {
                        let mut o = Vec::new();
                        if let Some(c) = cur.take() {
                            b.data(&c, &mut o);
                        }
                        b.finish(&mut o);
                        cur = Some(o);
                    }
                )*
                self.put(cur, &[]);
            }

            /// The whole body at once, when it is the version the
            /// exchange was told of and one body filter alone takes it.
            pub(crate) fn whole(&mut self, body: Whole<'_>) -> Option<Bytes> {
                let v = self.version?;
                if self.fed || 0 $(+ usize::from(self.$name.is_some()))* != 1 {
                    return None;
                }
                $(
                    if let Some(b) = self.$name.as_mut() {
                        if let Some(made) = b.whole(&v, body) {
                            self.fed = true;
                            // Its output is complete: nothing follows.
                            self.$name = None;
                            return Some(made);
                        }
                        return None;
                    }
                )*
                None
            }
        }
    };
}

// The registry: one line per filter, in the order they see a head.
filters! {
    compress: compress::Compress,
    headers: headers::HeaderRules,
}

impl Active {
    fn put(&mut self, cur: Option<Vec<u8>>, input: &[u8]) {
        match cur {
            Some(o) if self.out.is_empty() => self.out = o,
            Some(o) => self.out.extend_from_slice(&o),
            None => self.out.extend_from_slice(input),
        }
    }
}
