//! An in-process subrequest: the response a handler writes is collected
//! (bounded) instead of going to a client, for SSI's `include virtual` and
//! Lua's `stoa.subrequest`.

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
        }
    }

    pub(crate) fn push_body(&mut self, data: &[u8]) {
        let room = self.max.saturating_sub(self.body.len());
        if data.len() > room {
            self.cut = true;
        }
        self.body.extend_from_slice(&data[..data.len().min(room)]);
    }

    pub(crate) fn push_file(&mut self, file: &File, offset: u64, len: u64) {
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
