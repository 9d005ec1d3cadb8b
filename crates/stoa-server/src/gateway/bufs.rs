//! A request's read and write buffers toward an application, kept by the
//! worker for the next request: a fresh 32–64 KiB read buffer per request
//! cost a `malloc_consolidate` (FastCGI) and a large share of the
//! allocator's time per proxied request (callgrind).

use std::cell::RefCell;
use stoa_h1::response::ResponseHead;

/// Spare buffers above this many per worker are freed.
const SPARES: usize = 64;
/// A write buffer grown past this (a large request body) is not kept.
const KEEP_W: usize = 64 * 1024;
/// A response head that kept more than this (a large head) is not kept.
const KEEP_HEAD: usize = 8 * 1024;

pub struct Bufs {
    /// Toward the application.
    pub w: Vec<u8>,
    /// From the application; its capacity is the read size asked for.
    pub r: Vec<u8>,
    /// That read size.
    read: usize,
    /// A response head to parse into (the proxy's).
    pub head: ResponseHead,
}

thread_local! {
    /// This worker's spare buffers. Not in `local`, which cannot name the
    /// gateway's types (see local.rs).
    static SPARE: RefCell<Vec<Bufs>> = const { RefCell::new(Vec::new()) };
}

impl Bufs {
    /// Empty buffers, `r` with room for `read` bytes (the caller's read
    /// size: FastCGI and the proxy ask for different ones).
    pub fn take(read: usize) -> Bufs {
        SPARE
            .with(|s| {
                let mut s = s.borrow_mut();
                let i = s.iter().rposition(|b| b.r.capacity() == read)?;
                Some(s.swap_remove(i))
            })
            .unwrap_or_else(|| Bufs {
                w: Vec::with_capacity(2048),
                r: Vec::with_capacity(read),
                read,
                head: ResponseHead::default(),
            })
    }
}

impl Drop for Bufs {
    fn drop(&mut self) {
        // Only ordinary sizes go back: `r` as it was taken (not grown),
        // `w` unless a large request body grew it.
        if self.w.capacity() > KEEP_W || self.r.capacity() != self.read {
            return;
        }
        let (mut w, mut r) = (std::mem::take(&mut self.w), std::mem::take(&mut self.r));
        let head = match std::mem::take(&mut self.head) {
            h if h.allocated() > KEEP_HEAD => ResponseHead::default(),
            h => h,
        };
        w.clear();
        r.clear();
        // `try_with`: at thread exit the spares themselves are being dropped.
        let _ = SPARE.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if s.len() < SPARES {
                    s.push(Bufs {
                        w,
                        r,
                        read: self.read,
                        head,
                    });
                }
            }
        });
    }
}
