//! The PROXY protocol header ahead of a connection on a listener that
//! expects one (`[proxy_protocol]`): who may send it, reading it within
//! `header_timeout`, and the client address it carries.
//!
//! The header is peeked at and then read to its exact length, never
//! further, so the bytes after it (an HTTP request, HTTP/2's preface, a TLS
//! ClientHello) stay in the socket for the connection loops as if no
//! header had come.

use std::cell::Cell;
use std::net::SocketAddr;
use stoa_h1::proxy::TrustedProxies;
use stoa_h1::proxy_protocol::{self, Header, MAX_HEADER};
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Why a connection was refused, each kind logged once per worker (then
/// at debug level): a misconfigured balancer would otherwise log a line
/// per connection.
#[derive(Clone, Copy)]
enum Refusal {
    Untrusted = 1,
    Bad = 2,
    Slow = 4,
}

thread_local! {
    /// The refusals (`Refusal` bits) this worker has logged once. Here
    /// rather than in `local`: only this file uses it.
    static WARNED: Cell<u8> = const { Cell::new(0) };
}

fn refuse(kind: Refusal, peer: SocketAddr, why: &dyn std::fmt::Display) {
    let first = WARNED.with(|w| {
        let was = w.get();
        w.set(was | kind as u8);
        was & kind as u8 == 0
    });
    if first {
        tracing::warn!(
            "PROXY protocol: connection from {peer} closed: {why} (further ones are logged at debug level)"
        );
    } else {
        tracing::debug!("PROXY protocol: connection from {peer} closed: {why}");
    }
}

/// Reads the header of a connection from `peer` (`unix`: over a Unix
/// socket, trusted by its file's permissions) and returns the address it
/// carries: the client's for a proxied connection, `peer` for a LOCAL one
/// (the balancer's own health check). None: close the connection, it was
/// refused and logged.
pub async fn read(
    tcp: &TcpStream,
    peer: SocketAddr,
    unix: bool,
    trusted: &TrustedProxies,
    deadline: Instant,
) -> Option<SocketAddr> {
    if !unix && !trusted.contains(peer.ip()) {
        refuse(Refusal::Untrusted, peer, &"not in `trusted_proxies`");
        return None;
    }
    let mut buf = vec![0u8; MAX_HEADER];
    let got = tokio::time::timeout_at(deadline, peek_header(tcp, &mut buf)).await;
    let (header, len) = match got {
        Err(_) => {
            refuse(
                Refusal::Slow,
                peer,
                &"no complete header within header_timeout",
            );
            return None;
        }
        Ok(Err(why)) => {
            refuse(Refusal::Bad, peer, &why);
            return None;
        }
        Ok(Ok(h)) => h,
    };
    // The header's bytes are in the socket (peeked): take exactly them.
    let mut taken = 0;
    while taken < len {
        match tcp.try_read(&mut buf[taken..len]) {
            Ok(0) => return None,
            Ok(n) => taken += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if tokio::time::timeout_at(deadline, tcp.readable())
                    .await
                    .is_err()
                {
                    return None;
                }
            }
            Err(_) => return None,
        }
    }
    Some(match header {
        Header::Proxied { source, .. } => source,
        Header::Local => peer,
    })
}

/// Why peeking found no header.
enum PeekError {
    Header(proxy_protocol::Error),
    Closed,
    Io(std::io::Error),
}

impl std::fmt::Display for PeekError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeekError::Header(e) => write!(f, "{e}"),
            PeekError::Closed => f.write_str("closed before a complete header"),
            PeekError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Peeks until the bytes at the front of the socket hold a whole header.
async fn peek_header(tcp: &TcpStream, buf: &mut [u8]) -> Result<(Header, usize), PeekError> {
    loop {
        tcp.readable().await.map_err(PeekError::Io)?;
        let mut verdict = None;
        // An incomplete header reports "would block", which clears the
        // socket's readiness: the next wait lasts until more bytes come
        // (each arrival is a new edge), instead of peeking the same bytes
        // in a loop.
        let r = tcp.try_io(Interest::READABLE, || {
            let n = socket2::SockRef::from(tcp).peek(as_uninit(buf))?;
            if n == 0 {
                verdict = Some(Err(PeekError::Closed));
                return Ok(());
            }
            match proxy_protocol::parse(&buf[..n]) {
                Ok(Some(h)) => verdict = Some(Ok(h)),
                Ok(None) if n == buf.len() => {
                    verdict = Some(Err(PeekError::Header(proxy_protocol::Error::V2TooLong)))
                }
                Ok(None) => return Err(std::io::ErrorKind::WouldBlock.into()),
                Err(e) => verdict = Some(Err(PeekError::Header(e))),
            }
            Ok(())
        });
        match r {
            Ok(()) => {
                if let Some(v) = verdict {
                    return v;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(PeekError::Io(e)),
        }
    }
}

/// `buf` as socket2's receive buffer type.
fn as_uninit(buf: &mut [u8]) -> &mut [std::mem::MaybeUninit<u8>] {
    // SAFETY: u8 and MaybeUninit<u8> have the same layout, and the slice
    // is initialized already, so nothing uninitialized is ever read.
    unsafe { &mut *(buf as *mut [u8] as *mut [std::mem::MaybeUninit<u8>]) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    fn trusted(list: &[&str]) -> TrustedProxies {
        TrustedProxies::parse(list.iter().copied()).expect("ranges")
    }

    /// A header sent in pieces is read whole, and exactly: the request
    /// after it is still in the socket.
    #[test]
    fn a_header_in_pieces_is_read_to_its_end_and_no_further() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = l.local_addr().expect("addr");
            let writer = std::thread::spawn(move || {
                let mut c = std::net::TcpStream::connect(addr).expect("connect");
                c.set_nodelay(true).expect("nodelay");
                for piece in [
                    &b"PROXY TCP4 203."[..],
                    b"0.113.9 127.0.0.1 ",
                    b"5555 80\r\nGET /",
                ] {
                    c.write_all(piece).expect("write");
                    std::thread::sleep(Duration::from_millis(30));
                }
                c
            });
            let (s, peer) = l.accept().await.expect("accept");
            let deadline = Instant::now() + Duration::from_secs(5);
            let got = read(&s, peer, false, &trusted(&["127.0.0.1"]), deadline).await;
            assert_eq!(got, Some("203.0.113.9:5555".parse().expect("addr")));
            let _c = writer.join().expect("writer");
            let mut rest = [0u8; 16];
            s.readable().await.expect("readable");
            let n = s.try_read(&mut rest).expect("read");
            assert_eq!(&rest[..n], b"GET /");
        });
    }

    #[test]
    fn an_untrusted_peer_a_missing_header_and_a_silent_one_are_refused() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = l.local_addr().expect("addr");
            let header = b"PROXY TCP4 203.0.113.9 127.0.0.1 5555 80\r\n";
            for (send, list, wait) in [
                (&header[..], &["10.0.0.0/8"][..], 5),
                (b"GET / HTTP/1.1\r\n", &["127.0.0.1"][..], 5),
                (b"PROXY TCP4", &["127.0.0.1"][..], 1),
            ] {
                let mut c = std::net::TcpStream::connect(addr).expect("connect");
                c.write_all(send).expect("write");
                let (s, peer) = l.accept().await.expect("accept");
                let deadline = Instant::now() + Duration::from_millis(wait * 100);
                assert_eq!(read(&s, peer, false, &trusted(list), deadline).await, None);
            }
        });
    }
}
