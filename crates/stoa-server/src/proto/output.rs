//! The per-connection output queue: response heads, shared bodies and file
//! ranges, written with one `writev` for memory and `sendfile` for files.
//!
//! Pipelined responses accumulate here and go out together when the
//! connection has no more complete requests buffered, so a burst of
//! pipelined requests costs one write.

use super::stream::Stream;
use bytes::Bytes;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::time::{timeout, Duration};
use tokio_rustls::server::TlsStream;

/// Most bytes handed to one sendfile before the worker yields to its other
/// connections. Measured on 1 MiB files (wrk -c60, BENCHMARKS.md, issue 16):
/// 256 KiB pieces cost 155-160 µs of server CPU per response against
/// 128-136 µs for whole-file calls, so the piece is 1 MiB: a 1 MiB file still
/// goes in one call, and only larger files are cut.
const SENDFILE_PIECE: u64 = 1 << 20;

/// Most iovecs handed to one writev (Linux allows 1024; more buys nothing).
const MAX_IOV: usize = 16;

enum Seg {
    /// Bytes `start..end` of `Output::head`.
    Head {
        start: usize,
        end: usize,
    },
    Mem(Bytes),
    File {
        file: Rc<File>,
        offset: u64,
        len: u64,
    },
}

/// Responses waiting to be written, in order.
#[derive(Default)]
pub struct Output {
    /// Heads and small generated bodies are encoded straight into this
    /// buffer; `segs` refers to ranges of it.
    head: Vec<u8>,
    /// Where the not-yet-queued part of `head` starts.
    head_mark: usize,
    segs: VecDeque<Seg>,
    /// Bytes already written of the front segment.
    front_done: usize,
}

impl Output {
    /// The buffer to encode heads into; call [`Output::push_mem`] or
    /// [`Output::push_file`] (or [`Output::seal`]) to queue what was written.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.head
    }

    /// Queues what has been written to [`Output::buf`] since the last seal.
    pub fn seal(&mut self) {
        if self.head.len() > self.head_mark {
            self.segs.push_back(Seg::Head {
                start: self.head_mark,
                end: self.head.len(),
            });
            self.head_mark = self.head.len();
        }
    }

    /// Queues a shared body after what was encoded so far.
    pub fn push_mem(&mut self, body: Bytes) {
        self.seal();
        if !body.is_empty() {
            self.segs.push_back(Seg::Mem(body));
        }
    }

    /// Queues `len` bytes of `file` from `offset`, sent with sendfile.
    pub fn push_file(&mut self, file: Rc<File>, offset: u64, len: u64) {
        self.seal();
        if len > 0 {
            self.segs.push_back(Seg::File { file, offset, len });
        }
    }

    /// Takes the (empty) head buffer away while the connection is idle.
    pub fn take_buf(&mut self) -> Vec<u8> {
        debug_assert!(self.is_empty());
        self.head_mark = 0;
        std::mem::take(&mut self.head)
    }

    /// Gives back a buffer taken with [`Output::take_buf`] (or any empty one).
    pub fn adopt_buf(&mut self, mut buf: Vec<u8>) {
        if self.head.capacity() == 0 && self.segs.is_empty() {
            buf.clear();
            self.head = buf;
            self.head_mark = 0;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.segs.is_empty() && self.head.len() == self.head_mark
    }

    /// Writes everything queued. Each write must make progress within
    /// `idle` (a client that stops reading is cut off; a slow one is not).
    /// On error the queue is left partly written; the connection is to be
    /// dropped.
    pub async fn flush(&mut self, stream: &mut Stream, idle: Duration) -> io::Result<()> {
        let stream = match stream {
            Stream::Plain(s) => s,
            // Boxed and called virtually: the TLS writer stays out of the
            // plaintext path's future and code (see `stream::cold`).
            Stream::Tls(t) => return super::stream::cold(self.flush_tls(t, idle)).await,
        };
        self.seal();
        let mut corked = false;
        while let Some(front) = self.segs.front_mut() {
            if let Seg::File { file, offset, len } = front {
                let fd = file.as_raw_fd();
                while *len > 0 {
                    let piece = (*len).min(SENDFILE_PIECE);
                    let n = timeout(idle, send_file(stream, fd, offset, piece))
                        .await
                        .map_err(|_| timed_out())??;
                    *len -= n as u64;
                    if corked {
                        // The head went out with the body's first bytes;
                        // the rest flows as usual.
                        cork(stream, false);
                        corked = false;
                    }
                    if *len > 0 {
                        // Let the worker's other connections run between
                        // pieces: a client that reads as fast as loopback
                        // would otherwise hold the worker for a whole file.
                        tokio::task::yield_now().await;
                    }
                }
                self.segs.pop_front();
                continue;
            }
            // A head followed by a file: corked, so that it leaves in the
            // same segment as the start of the file instead of a small one
            // of its own (TCP_NODELAY is on). Measured on 1 MiB files with
            // wrk -c60: 2.2k -> 3.5-3.8k responses/s (see BENCHMARKS.md).
            if !corked && self.segs.iter().any(|s| matches!(s, Seg::File { .. })) {
                cork(stream, true);
                corked = true;
            }
            // Gather the leading run of memory segments into one writev.
            let mut iov: [IoSlice<'_>; MAX_IOV] = [IoSlice::new(&[]); MAX_IOV];
            let mut n_iov = 0;
            for (i, seg) in self.segs.iter().enumerate() {
                if n_iov == MAX_IOV {
                    break;
                }
                let bytes: &[u8] = match seg {
                    Seg::Head { start, end } => &self.head[*start..*end],
                    Seg::Mem(b) => b,
                    Seg::File { .. } => break,
                };
                let skip = if i == 0 { self.front_done } else { 0 };
                iov[n_iov] = IoSlice::new(&bytes[skip..]);
                n_iov += 1;
            }
            let mut written = timeout(idle, stream.write_vectored(&iov[..n_iov]))
                .await
                .map_err(|_| timed_out())??;
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            // Advance over fully written segments.
            while written > 0 {
                let Some(seg) = self.segs.front() else { break };
                let seg_len = match seg {
                    Seg::Head { start, end } => end - start,
                    Seg::Mem(b) => b.len(),
                    Seg::File { .. } => break,
                } - self.front_done;
                if written >= seg_len {
                    written -= seg_len;
                    self.front_done = 0;
                    self.segs.pop_front();
                } else {
                    self.front_done += written;
                    written = 0;
                }
            }
        }
        self.head.clear();
        self.head_mark = 0;
        self.front_done = 0;
        Ok(())
    }
}

impl Output {
    /// [`Output::flush`] over TLS: no sendfile (the kernel would send the
    /// file's bytes unencrypted; see docs/ARCHITECTURE.md on kTLS), so
    /// memory segments are gathered and file ranges read with `pread`
    /// into this worker's reused buffer, each piece encrypted by rustls
    /// and written. Pieces of [`TLS_PIECE`] bytes fill whole records.
    async fn flush_tls(
        &mut self,
        tls: &mut TlsStream<TcpStream>,
        idle: Duration,
    ) -> io::Result<()> {
        self.seal();
        let mut buf = TLS_BUF.with(|b| std::mem::take(&mut *b.borrow_mut()));
        let r = self.flush_tls_with(tls, idle, &mut buf).await;
        buf.clear();
        if buf.capacity() <= 2 * TLS_PIECE {
            TLS_BUF.with(|b| *b.borrow_mut() = buf);
        }
        r
    }

    async fn flush_tls_with(
        &mut self,
        tls: &mut TlsStream<TcpStream>,
        idle: Duration,
        buf: &mut Vec<u8>,
    ) -> io::Result<()> {
        // A flush that fails leaves the queue partly written; the
        // connection is dropped then, as on plaintext.
        while let Some(seg) = self.segs.pop_front() {
            buf.clear();
            match seg {
                Seg::Head { start, end } => buf.extend_from_slice(&self.head[start..end]),
                Seg::Mem(b) => buf.extend_from_slice(&b),
                Seg::File { file, offset, len } => {
                    let mut offset = offset;
                    let mut left = len;
                    while left > 0 {
                        let want = left.min(TLS_PIECE as u64) as usize;
                        buf.resize(want, 0);
                        let n = file.read_at(&mut buf[..want], offset)?;
                        if n == 0 {
                            // The file shrank under us: the promised length
                            // cannot be sent, so the connection must be cut.
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "file truncated while sending",
                            ));
                        }
                        timeout(idle, tls.write_all(&buf[..n]))
                            .await
                            .map_err(|_| timed_out())??;
                        offset += n as u64;
                        left -= n as u64;
                    }
                    continue;
                }
            }
            // Small segments that follow go into the same write (one
            // record, one syscall) rather than one each.
            while buf.len() < TLS_PIECE {
                match self.segs.front() {
                    Some(Seg::Head { start, end }) => {
                        buf.extend_from_slice(&self.head[*start..*end]);
                    }
                    Some(Seg::Mem(b)) => buf.extend_from_slice(b),
                    _ => break,
                }
                self.segs.pop_front();
            }
            timeout(idle, tls.write_all(buf))
                .await
                .map_err(|_| timed_out())??;
        }
        timeout(idle, tls.flush())
            .await
            .map_err(|_| timed_out())??;
        self.head.clear();
        self.head_mark = 0;
        self.front_done = 0;
        Ok(())
    }
}

/// How much of a file one TLS write carries (a multiple of the 16 KiB
/// record size).
const TLS_PIECE: usize = 64 * 1024;

thread_local! {
    /// The worker's buffer for file ranges read for TLS: reused, so a
    /// large file over TLS costs no allocation per piece. Here rather
    /// than in `local`: only this file uses it, with no `Worker` at hand.
    static TLS_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Sets or clears TCP_CORK; a failure only costs an extra segment.
fn cork(stream: &TcpStream, on: bool) {
    let _ = socket2::SockRef::from(stream).set_cork(on);
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "client stopped reading")
}

/// One sendfile call's worth, waiting for the socket to be writable.
async fn send_file(stream: &TcpStream, fd: i32, offset: &mut u64, len: u64) -> io::Result<usize> {
    let sock = stream.as_raw_fd();
    loop {
        let r = stream.try_io(Interest::WRITABLE, || {
            let mut off = *offset as libc::off_t;
            let count = len.min(1 << 30) as usize;
            // SAFETY: both descriptors are open for the duration of the call
            // (the socket is borrowed, the file is held by an Rc in the
            // queue); `off` is a valid, exclusively borrowed off_t.
            let n = unsafe { libc::sendfile(sock, fd, &mut off, count) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match r {
            Ok(0) => {
                // The file shrank under us: the promised length cannot be
                // sent, so the connection must be cut.
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file truncated while sending",
                ));
            }
            Ok(n) => {
                *offset += n as u64;
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => stream.writable().await?,
            Err(e) => return Err(e),
        }
    }
}
