//! The byte stream under a connection: a TCP socket, or TLS over one.
//!
//! An enum rather than a trait object or a type parameter: the plaintext
//! path pays one match per read or write (no box, no virtual call, no
//! second copy of every connection loop), and the TLS session, which is
//! large, is boxed so that plaintext connections' futures stay small.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// `AsyncWrite` for a wrapper that only watches or rewinds what is read:
/// every write goes straight to `$field` (as [`Rewind`] does).
#[macro_export]
macro_rules! write_through {
    ($ty:ty, $field:ident $(, $($gen:tt)*)?) => {
        impl $(<$($gen)*>)? tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.get_mut().$field).poll_write(cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.get_mut().$field).poll_write_vectored(cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                self.$field.is_write_vectored()
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.get_mut().$field).poll_flush(cx)
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.get_mut().$field).poll_shutdown(cx)
            }
        }
    };
}

/// A client connection's byte stream.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The socket under the stream (for socket options and addresses).
    #[inline]
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => t.get_ref().0,
        }
    }

    #[inline]
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.tcp().set_nodelay(on)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp().local_addr()
    }

    /// The TLS version and cipher suite, as CGI's SSL_PROTOCOL and
    /// SSL_CIPHER name them.
    pub fn tls_info(&self) -> Option<(&'static str, &'static str)> {
        let Stream::Tls(t) = self else { return None };
        tls_info(t.get_ref().1)
    }

    /// The client's verified certificate, over TLS with one (made anew
    /// per call: see `ClientCert`).
    pub fn client_cert(&self) -> Option<crate::http::client_cert::ClientCert> {
        let Stream::Tls(t) = self else { return None };
        client_cert(t.get_ref().1)
    }

    /// Waits until a read would return something (data or end of stream).
    /// Over TLS, decrypted bytes may already wait inside the session, with
    /// nothing left on the socket.
    #[inline]
    pub async fn readable(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.readable().await,
            Stream::Tls(t) => cold(tls_readable(t)).await,
        }
    }

    /// Reads what is there without waiting: `WouldBlock` when nothing is.
    #[inline]
    pub fn try_read_buf(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.try_read_buf(buf),
            Stream::Tls(t) => tls_try_read_buf(t, buf),
        }
    }

    /// Closes the sending side: a TLS close_notify first (so the client
    /// can tell the end from a truncation), then the socket's FIN. Never
    /// waits.
    pub fn shutdown_write(&mut self) {
        if let Stream::Tls(t) = self {
            tls_close_notify(t);
        }
        let _ = socket2::SockRef::from(self.tcp()).shutdown(std::net::Shutdown::Write);
    }

    /// The socket itself, for reading raw bytes once the stream is shut
    /// down (a lingering close: nothing the client sends matters then,
    /// TLS or not).
    #[inline]
    pub fn tcp_mut(&mut self) -> &mut TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => t.get_mut().0,
        }
    }

    /// Over TLS, whether decrypted bytes (or the peer's close) already wait
    /// inside the session, so that the socket's readiness says nothing:
    /// the connection loop then reads at once instead of waiting on it.
    #[inline]
    pub fn tls_pending(&mut self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(t) => tls_pending(t),
        }
    }
}

/// A TLS-only future behind a box and a virtual call. Not for speed: so
/// that the compiler cannot inline rustls into the plaintext connection
/// loop, which then grows past what it inlines into the connection's task
/// (measured with bench/seam-guard.sh: +2.4 % instructions per static
/// request when it did).
pub fn cold<'a, T>(
    f: impl std::future::Future<Output = T> + 'a,
) -> Pin<Box<dyn std::future::Future<Output = T> + 'a>> {
    Box::pin(f)
}

#[inline(never)]
fn tls_pending(t: &mut TlsStream<TcpStream>) -> bool {
    match t.get_mut().1.process_new_packets() {
        Ok(st) => st.plaintext_bytes_to_read() > 0 || st.peer_has_closed(),
        // The error surfaces on the next read.
        Err(_) => true,
    }
}

/// [`Stream::readable`] over TLS, out of the plaintext path's way.
async fn tls_readable(t: &mut TlsStream<TcpStream>) -> io::Result<()> {
    if tls_pending(t) {
        return Ok(());
    }
    t.get_ref().0.readable().await
}

/// Queues close_notify and writes what rustls holds without waiting (a
/// socket too full to take it is a client that stopped reading, whose
/// connection is going anyway).
#[inline(never)]
fn tls_close_notify(t: &mut TlsStream<TcpStream>) {
    struct NoWait<'a>(&'a TcpStream);
    impl io::Write for NoWait<'_> {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.try_write(b)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let (tcp, conn) = t.get_mut();
    conn.send_close_notify();
    while conn.wants_write() {
        if conn.write_tls(&mut NoWait(tcp)).is_err() {
            break;
        }
    }
}

/// [`Stream::try_read_buf`] over TLS: one poll with a waker that does
/// nothing. A record that is not complete yet leaves the read pending,
/// which is what `WouldBlock` means here; the caller waits with
/// `readable` again, which registers the real waker.
#[inline(never)]
fn tls_try_read_buf(t: &mut TlsStream<TcpStream>, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let fut = t.read_buf(buf);
    let mut fut = std::pin::pin!(fut);
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(r) => r,
        Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
    }
}

/// The version and cipher suite of a TLS session, in OpenSSL's names
/// (what mod_ssl gives CGI: `TLSv1.3`, `TLS_AES_128_GCM_SHA256`).
pub fn tls_info(c: &rustls::ServerConnection) -> Option<(&'static str, &'static str)> {
    let version = match c.protocol_version()? {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
        _ => "TLS",
    };
    let suite = c.negotiated_cipher_suite()?.suite().as_str().unwrap_or("");
    Some((version, suite))
}

#[inline(never)]
fn client_cert(c: &rustls::ServerConnection) -> Option<crate::http::client_cert::ClientCert> {
    super::tls::client::client_cert(c)
}

// The TLS arms of the I/O traits, never inlined (see [`cold`]).

#[inline(never)]
fn tls_poll_read(
    t: &mut TlsStream<TcpStream>,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    Pin::new(t).poll_read(cx, buf)
}

#[inline(never)]
fn tls_poll_write(
    t: &mut TlsStream<TcpStream>,
    cx: &mut Context<'_>,
    buf: &[u8],
) -> Poll<io::Result<usize>> {
    Pin::new(t).poll_write(cx, buf)
}

#[inline(never)]
fn tls_poll_write_vectored(
    t: &mut TlsStream<TcpStream>,
    cx: &mut Context<'_>,
    bufs: &[io::IoSlice<'_>],
) -> Poll<io::Result<usize>> {
    Pin::new(t).poll_write_vectored(cx, bufs)
}

#[inline(never)]
fn tls_poll_flush(t: &mut TlsStream<TcpStream>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    Pin::new(t).poll_flush(cx)
}

impl AsyncRead for Stream {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(t) => tls_poll_read(t, cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(t) => tls_poll_write(t, cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(t) => tls_poll_write_vectored(t, cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(t) => t.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(t) => tls_poll_flush(t, cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(t) => Pin::new(&mut **t).poll_shutdown(cx),
        }
    }
}

/// A stream with bytes already read from it put back in front (the
/// HTTP/2 preface the HTTP/1 loop read before it knew).
pub struct Rewind {
    pre: Vec<u8>,
    at: usize,
    pub inner: Stream,
}

impl Rewind {
    pub fn new(pre: Vec<u8>, inner: Stream) -> Rewind {
        Rewind { pre, at: 0, inner }
    }

    /// Bytes put back are still to be read.
    pub fn rewinding(&self) -> bool {
        self.at < self.pre.len()
    }

    /// The stream itself, once every byte put back was read again (else
    /// the Rewind, unchanged).
    pub fn into_inner(self) -> Result<Stream, Rewind> {
        if self.rewinding() {
            return Err(self);
        }
        Ok(self.inner)
    }
}

impl AsyncRead for Rewind {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.at < me.pre.len() {
            let n = (me.pre.len() - me.at).min(buf.remaining());
            buf.put_slice(&me.pre[me.at..me.at + n]);
            me.at += n;
            if me.at == me.pre.len() {
                me.pre = Vec::new();
                me.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut me.inner).poll_read(cx, buf)
    }
}

// A reader wrapper writes straight through.
crate::write_through!(Rewind, inner);
