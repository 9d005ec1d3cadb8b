//! An in-process subrequest: the response a handler writes is collected
//! (bounded) instead of going to a client, for SSI's `include virtual` and
//! Lua's `stoa.subrequest`; or handed to a [`Sink`] as it is written, for
//! the response cache's fetch (the application's response fills a stored
//! object, whatever the clients do).

use bytes::Bytes;
use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;

/// Where a subrequest's response goes.
pub struct Sub {
    pub(crate) peer: SocketAddr,
    pub(crate) local: Option<SocketAddr>,
    pub(crate) status: u16,
    /// Header lines as `Name: value\r\n`.
    pub(crate) head: Vec<u8>,
    body: Vec<u8>,
    max: usize,
    /// More body was written than `max`: the rest was dropped.
    pub(crate) cut: bool,
    /// Where the response goes instead of being collected.
    sink: Option<Box<dyn Sink>>,
}

/// What takes a subrequest's response as it is written (the cache's
/// fill): the head once it is complete (`head`: the header lines as
/// `Name: value\r\n`, no framing fields; `len`: the body's length when
/// the handler announced one), body pieces, then its end. A
/// sink that is dropped without `finish` (the handler failed, or its task
/// was dropped) must count the response as failed.
pub(crate) trait Sink {
    fn head(&mut self, status: u16, head: &[u8], len: Option<u64>);
    fn body(&mut self, data: &[u8]);
    /// The response ended: `whole` when every byte it announced came.
    fn finish(&mut self, whole: bool);
}

/// A subrequest's response. Shared bytes: a cached static file comes
/// back as the cache's own head and body, without a copy.
#[derive(Debug, Default)]
pub struct SubResponse {
    pub status: u16,
    /// Header lines as `Name: value\r\n`.
    pub head: Bytes,
    pub body: Bytes,
    /// The body was longer than the subrequest's bound and was cut.
    pub cut: bool,
}

impl Sub {
    /// A subrequest of a request from `peer` to `local`, keeping at most
    /// `max` bytes of body.
    pub fn new(peer: SocketAddr, local: Option<SocketAddr>, max: usize) -> Sub {
        Sub {
            peer,
            local,
            status: 0,
            // Room for a handler's usual header fields: no regrowth.
            head: Vec::with_capacity(256),
            body: Vec::new(),
            max,
            cut: false,
            sink: None,
        }
    }

    /// A subrequest whose response goes to `sink` as it is written:
    /// nothing is collected, no access-log line is written (the client's
    /// exchange writes one) and no response filter runs (the exchange has
    /// none unless given an `Edge` with some).
    pub(crate) fn into_sink(
        peer: SocketAddr,
        local: Option<SocketAddr>,
        sink: Box<dyn Sink>,
    ) -> Sub {
        Sub {
            peer,
            local,
            status: 0,
            head: Vec::with_capacity(512),
            body: Vec::new(),
            max: 0,
            cut: false,
            sink: Some(sink),
        }
    }

    /// Whether the response goes to a sink (a cache fill).
    pub(crate) fn has_sink(&self) -> bool {
        self.sink.is_some()
    }

    /// The head is complete (the exchange wrote no framing field here);
    /// `len`: the body's length, None when it is streamed.
    pub(crate) fn head_ended(&mut self, len: Option<u64>) {
        if let Some(s) = self.sink.as_mut() {
            s.head(self.status, &self.head, len);
        }
    }

    /// The response ended (`whole`: as long as it said).
    pub(crate) fn ended(&mut self, whole: bool) {
        if let Some(mut s) = self.sink.take() {
            s.finish(whole);
        }
    }

    pub(crate) fn push_body(&mut self, data: &[u8]) {
        if let Some(s) = self.sink.as_mut() {
            return s.body(data);
        }
        let room = self.max.saturating_sub(self.body.len());
        if data.len() > room {
            self.cut = true;
        }
        self.body.extend_from_slice(&data[..data.len().min(room)]);
    }

    pub(crate) fn push_file(&mut self, file: &File, offset: u64, len: u64) {
        if let Some(s) = self.sink.as_mut() {
            // A file's range, in pieces (a handler behind a cache sends
            // files rarely: a FastCGI X-Sendfile).
            let mut buf = vec![0u8; len.min(64 * 1024) as usize];
            let (mut at, end) = (offset, offset + len);
            while at < end {
                let n = ((end - at) as usize).min(buf.len());
                if let Err(e) = file.read_exact_at(&mut buf[..n], at) {
                    tracing::error!("cache fill: reading a file: {e}");
                    self.cut = true;
                    return;
                }
                s.body(&buf[..n]);
                at += n as u64;
            }
            return;
        }
        let room = self.max.saturating_sub(self.body.len()) as u64;
        let want = len.min(room) as usize;
        if (want as u64) < len {
            self.cut = true;
        }
        let at = self.body.len();
        self.body.resize(at + want, 0);
        match file.read_exact_at(&mut self.body[at..], offset) {
            Ok(()) => {}
            Err(e) => {
                tracing::error!("subrequest: reading a file: {e}");
                self.body.truncate(at);
                self.cut = true;
            }
        }
    }

    /// The collected response.
    pub fn into_response(self) -> SubResponse {
        SubResponse {
            status: self.status,
            head: Bytes::from(self.head),
            body: Bytes::from(self.body),
            cut: self.cut,
        }
    }
}
