//! A response body waiting to be framed, shared by the HTTP/2 and HTTP/3
//! streams: small writes gathered into one buffer, shared buffers and file
//! ranges kept as they are, in order. Most responses are one piece, which
//! needs no allocation beyond it.

use bytes::Bytes;
use std::collections::VecDeque;
use std::fs::File;
use std::rc::Rc;

pub(crate) enum Piece {
    Mem(Bytes),
    File {
        file: Rc<File>,
        offset: u64,
        len: u64,
    },
}

#[derive(Default)]
pub(crate) struct Pieces {
    /// Small writes, gathered until the next seal.
    acc: Vec<u8>,
    first: Option<Piece>,
    rest: VecDeque<Piece>,
}

impl Pieces {
    pub(crate) fn push(&mut self, data: &[u8]) {
        self.acc.extend_from_slice(data);
    }

    /// Makes the gathered small writes a piece of their own.
    pub(crate) fn seal(&mut self) {
        if !self.acc.is_empty() {
            let b = Bytes::from(std::mem::take(&mut self.acc));
            self.push_back(Piece::Mem(b));
        }
    }

    pub(crate) fn push_mem(&mut self, body: Bytes) {
        self.seal();
        if !body.is_empty() {
            self.push_back(Piece::Mem(body));
        }
    }

    pub(crate) fn push_file(&mut self, file: Rc<File>, offset: u64, len: u64) {
        self.seal();
        if len > 0 {
            self.push_back(Piece::File { file, offset, len });
        }
    }

    fn push_back(&mut self, p: Piece) {
        if self.first.is_none() {
            self.first = Some(p);
        } else {
            self.rest.push_back(p);
        }
    }

    pub(crate) fn front(&self) -> Option<&Piece> {
        self.first.as_ref()
    }

    pub(crate) fn front_mut(&mut self) -> Option<&mut Piece> {
        self.first.as_mut()
    }

    pub(crate) fn pop_front(&mut self) -> Option<Piece> {
        let p = self.first.take();
        self.first = self.rest.pop_front();
        p
    }

    /// No sealed piece waits (gathered small writes are not counted).
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    pub(crate) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    pub(crate) fn clear(&mut self) {
        self.first = None;
        self.rest.clear();
    }
}
