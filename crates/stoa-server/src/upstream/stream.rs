//! Connections to applications: a Unix or TCP stream that can be parked
//! between requests and adopted by another worker. Shared by FastCGI and
//! the proxy; knows no protocol.

use super::target::Target;
use super::tls::{Alpn, ClientStream};
use crate::local::worker_index;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection to an application process.
pub enum AppStream {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
    /// TLS over TCP (a pool's `tls` key, `https://` addresses); boxed, as
    /// its session is some 1 KiB beside a socket's few bytes.
    Tls(Box<ClientStream>),
}

impl AppStream {
    /// Connects, giving up after `limit` (an address that drops SYNs
    /// would otherwise hold the request for the kernel's two minutes).
    /// A TLS server gets the handshake too, within the same limit, asking
    /// for HTTP/1.1 (ALPN).
    pub async fn connect(t: &Target, limit: std::time::Duration) -> io::Result<AppStream> {
        AppStream::connect_alpn(t, limit, Alpn::Http1).await
    }

    /// [`connect`](Self::connect), asking a TLS server for `alpn` (HTTP/2
    /// upstreams ask for "h2"; a plain server is connected to as it is:
    /// HTTP/2 with prior knowledge). What the server chose:
    /// [`alpn`](Self::alpn).
    pub async fn connect_alpn(
        t: &Target,
        limit: std::time::Duration,
        alpn: Alpn,
    ) -> io::Result<AppStream> {
        let c = async {
            match t {
                Target::Unix(p) => tokio::net::UnixStream::connect(p)
                    .await
                    .map(AppStream::Unix),
                Target::Tcp(a) => tokio::net::TcpStream::connect(a).await.map(AppStream::Tcp),
                Target::Tls(t) => {
                    return super::tls::connect(t, limit, alpn)
                        .await
                        .map(|s| AppStream::Tls(Box::new(s)))
                }
            }
        };
        tokio::time::timeout(limit, c)
            .await
            .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")))
    }

    /// Takes a kept-alive connection: as it is when this worker left it,
    /// else moved from the other worker's event loop into this one (two
    /// epoll_ctl).
    pub fn from_idle(c: IdleConn) -> io::Result<AppStream> {
        if c.owner == worker_index() {
            return Ok(c.stream);
        }
        match c.stream {
            AppStream::Unix(s) => {
                tokio::net::UnixStream::from_std(s.into_std()?).map(AppStream::Unix)
            }
            AppStream::Tcp(s) => tokio::net::TcpStream::from_std(s.into_std()?).map(AppStream::Tcp),
            // The socket moves; the TLS session (keys, sequence numbers)
            // stays as it is.
            AppStream::Tls(mut s) => {
                s.get_mut().0.rebind()?;
                Ok(AppStream::Tls(s))
            }
        }
    }

    /// The protocol a TLS server chose (ALPN), if any.
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            AppStream::Tls(s) => s.get_ref().1.alpn_protocol(),
            _ => None,
        }
    }

    /// The TCP socket (under TLS too), none for a Unix one.
    fn tcp(&self) -> Option<&tokio::net::TcpStream> {
        match self {
            AppStream::Unix(_) => None,
            AppStream::Tcp(s) => Some(s),
            AppStream::Tls(s) => s.get_ref().0.tcp(),
        }
    }

    /// Reads into the spare capacity of `buf` (no zeroing, no allocation).
    pub(crate) fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Vec<u8>,
    ) -> Poll<io::Result<usize>> {
        let len = buf.len();
        let mut rb = ReadBuf::uninit(buf.spare_capacity_mut());
        match Pin::new(&mut *self).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                // SAFETY: `ReadBuf` guarantees its first `n` bytes (filled)
                // were initialized by the read, and they are the `n` bytes
                // of spare capacity right after `len`.
                unsafe { buf.set_len(len + n) };
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Parks the connection for reuse by any worker, still registered here.
    pub fn into_idle(self) -> IdleConn {
        IdleConn::new(self, worker_index())
    }

    /// The socket's pending error (SO_ERROR), taking it.
    pub fn take_error(&self) -> Option<io::Error> {
        match self {
            AppStream::Unix(s) => s.take_error().ok().flatten(),
            _ => self.tcp()?.take_error().ok().flatten(),
        }
    }

    /// Whether a parked connection still looks usable: the application has
    /// neither closed it nor sent anything (an idle FastCGI connection has
    /// nothing to say). One `recv(MSG_PEEK)`. Over TLS the same: a
    /// server's close_notify (or anything else it sent unasked) is bytes
    /// waiting, so the connection counts as closing.
    pub fn looks_open(&self) -> bool {
        use std::os::fd::AsRawFd;
        let fd = match self {
            AppStream::Unix(s) => s.as_raw_fd(),
            // rustls no longer wants to read once it has taken the
            // server's close_notify in (with the response, in one read),
            // or holds bytes nobody asked for.
            AppStream::Tls(s) if !s.get_ref().1.wants_read() => return false,
            _ => match self.tcp() {
                Some(s) => s.as_raw_fd(),
                None => return false,
            },
        };
        let mut b = 0u8;
        // SAFETY: `fd` is a socket this stream owns for the whole call, and
        // the buffer is one valid byte.
        let n = unsafe {
            libc::recv(
                fd,
                (&mut b as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
    }
}

impl AsyncRead for AppStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            AppStream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            AppStream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            AppStream::Tls(s) => super::tls::poll_read(s, cx, buf),
        }
    }
}

impl AsyncWrite for AppStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            AppStream::Unix(s) => Pin::new(s).poll_write(cx, buf),
            AppStream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            AppStream::Tls(s) => super::tls::poll_write(s, cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            AppStream::Unix(s) => Pin::new(s).poll_flush(cx),
            AppStream::Tcp(s) => Pin::new(s).poll_flush(cx),
            AppStream::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            AppStream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            AppStream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            AppStream::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}

/// A kept-alive connection to an application, still registered with the
/// event loop of the worker that used it last (`owner`): that worker takes
/// it back for nothing; another one moves it into its own event loop first.
pub struct IdleConn {
    pub stream: AppStream,
    pub owner: usize,
    /// The application may close it right after its last request (one
    /// that carried a body the application may have left unread): whoever
    /// takes it checks it first.
    pub suspect: bool,
    /// How long it may stay parked when that is shorter than the pool's
    /// `keepalive_timeout` (an HTTP upstream's `Keep-Alive: timeout=N`).
    pub ttl: Option<std::time::Duration>,
    /// When it was parked (the pool's clock, ms).
    pub(crate) since: u64,
}

impl IdleConn {
    pub fn new(stream: AppStream, owner: usize) -> IdleConn {
        IdleConn {
            stream,
            owner,
            suspect: false,
            ttl: None,
            since: 0,
        }
    }
}

impl std::fmt::Debug for IdleConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IdleConn(worker {})", self.owner)
    }
}
