//! Sending an application's response to the client: what CGI and FastCGI
//! (and later the proxy) share once the application's head is parsed.
//!
//! The head goes through [`Reply`](crate::conn::Reply), so the framing is
//! chosen for the client's HTTP version: the application's Content-Length
//! when it gave one, else chunked (HTTP/1.1) or close-delimited (HTTP/1.0).
//! Every piece of body is written before the next is read (backpressure).

use crate::conn::{Ctx, Io};
use stoa_h1::body::{push_chunk_header, CHUNK_END, LAST_CHUNK};
use stoa_h1::{Method, RequestHead};

/// An application's response on its way to the client.
pub struct Downstream {
    chunked: bool,
    /// Body bytes still allowed when the application gave a length.
    remaining: Option<u64>,
    keep: bool,
    status: u16,
    sent: u64,
    /// HEAD, 204 or 304: the head is all there is.
    pub bodyless: bool,
}

impl Downstream {
    /// Queues the response head for `h`. `body_done` says whether the
    /// request body was read to its end (if not, the connection closes
    /// after this response). `whole` is the body's length when all of it
    /// is already in hand: it then goes out with a Content-Length instead
    /// of chunks (one write for the whole response).
    pub fn start(
        h: &stoa_cgi::ResponseHead,
        head: &RequestHead,
        io: &mut Io,
        ctx: &Ctx<'_>,
        body_done: bool,
        whole: Option<u64>,
    ) -> Downstream {
        let mut reply = ctx.reply(&mut io.out, head);
        if !body_done {
            reply.keep_alive = false;
        }
        let status = h.effective_status();
        reply.start(status);
        if let Some(ct) = &h.content_type {
            reply.header("Content-Type", ct);
        }
        if let Some(loc) = &h.location {
            reply.header("Location", loc);
        }
        for (name, value) in &h.headers {
            reply.header(name, value);
        }
        let is_head = head.method == Method::Head;
        let bodyless = stoa_h1::response::bodyless(is_head, status);
        let mut chunked = false;
        let remaining = if bodyless {
            reply.end_head(if is_head { h.content_length } else { None });
            Some(0)
        } else if let Some(cl) = h.content_length.or(whole) {
            reply.end_head(Some(cl));
            Some(cl)
        } else {
            chunked = reply.end_head_stream();
            None
        };
        Downstream {
            chunked,
            remaining,
            keep: reply.keep_alive,
            status,
            sent: 0,
            bodyless,
        }
    }

    /// A response passed on untouched (NPH): close-delimited, never reused.
    pub fn raw(status: u16) -> Downstream {
        Downstream {
            chunked: false,
            remaining: None,
            keep: false,
            status,
            sent: 0,
            bodyless: false,
        }
    }

    /// Whether every byte the application promised has been sent.
    pub fn is_complete(&self) -> bool {
        self.remaining == Some(0)
    }

    /// Frames and writes a piece of body (bytes past a promised length are
    /// dropped). Returns false when the client is gone.
    pub async fn send(&mut self, data: &[u8], io: &mut Io, ctx: &Ctx<'_>) -> bool {
        self.queue(data, io);
        io.flush(ctx.rt).await
    }

    /// Frames a piece of body into the output queue without writing it
    /// (the connection loop writes it with whatever follows).
    pub fn queue(&mut self, data: &[u8], io: &mut Io) {
        let mut data = data;
        if let Some(r) = self.remaining.as_mut() {
            let take = (*r).min(data.len() as u64) as usize;
            data = &data[..take];
            *r -= take as u64;
        }
        if !data.is_empty() {
            let buf = io.out.buf();
            if self.chunked {
                push_chunk_header(buf, data.len());
            }
            buf.extend_from_slice(data);
            if self.chunked {
                buf.extend_from_slice(CHUNK_END);
            }
            self.sent += data.len() as u64;
        }
    }

    /// Ends the body (the last chunk), logs the exchange, and says whether
    /// the connection may carry another request. A body shorter than its
    /// promised length leaves the connection to be closed: that is how the
    /// client learns of the truncation.
    pub fn finish(self, head: &RequestHead, io: &mut Io, ctx: &Ctx<'_>, body_done: bool) -> bool {
        if self.chunked {
            io.out.buf().extend_from_slice(LAST_CHUNK);
        }
        let truncated = self.remaining.is_some_and(|r| r > 0);
        ctx.worker.log_access(
            io.peer,
            head.request_line(),
            self.status,
            self.sent,
            head.header("referer"),
            head.header("user-agent"),
        );
        self.keep && !truncated && body_done
    }

    pub fn truncated(&self) -> bool {
        self.remaining.is_some_and(|r| r > 0)
    }
}
