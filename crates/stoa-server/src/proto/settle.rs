//! At stop, a connection is let go only once the client has its last
//! bytes.
//!
//! `write` and `sendfile` return when the kernel has *queued* the bytes;
//! a large response to a slow reader can still have megabytes in the
//! socket's send queue when its connection ends (measured on the
//! shutdown test: 3 MB of a 6 MiB download). Closing the socket then
//! makes it an orphan that the kernel finishes sending alone, and the
//! process exits. But Linux does not promise to finish: an orphan with
//! data still queued is reset (RST, the rest of the response destroyed)
//! when orphans are many or TCP memory is short (`tcp_check_oom`:
//! "too many orphaned sockets", "out of memory -- consider tuning
//! tcp_mem"), which is what a loaded machine gives. A socket a process
//! still holds is never reset for that: it waits. So a stopping worker
//! sends its FIN and holds each finished connection until the client has
//! acknowledged everything (`SIOCOUTQ` is 0) or closed, while it makes
//! progress; the stop's own limits (`shutdown_timeout` for a fast stop)
//! still bound the wait.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;
use tokio::time::Instant;

/// How often the send queue is looked at while holding a connection.
const POLL: Duration = Duration::from_millis(10);

/// Bytes the kernel still holds for the peer: sent but unacknowledged,
/// or not sent yet (a FIN counts as one). None when it cannot tell.
fn unacked(fd: BorrowedFd<'_>) -> Option<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) writes one int through a valid pointer;
    // the descriptor is borrowed, so it stays open for the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    (r == 0).then_some(n.max(0) as usize)
}

/// A second descriptor for the socket `fd`, so that it stays open after
/// the one its owner holds is closed (an HTTP/2 connection owns its
/// stream and closes it when dropped).
pub fn hold(fd: RawFd) -> Option<OwnedFd> {
    // SAFETY: dup on a descriptor the caller holds open; the new one is
    // ours alone, so OwnedFd may close it.
    let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    // SAFETY: `d` is a fresh descriptor nobody else owns.
    (d >= 0).then(|| unsafe { OwnedFd::from_raw_fd(d) })
}

/// Sends the FIN (`SHUT_WR`) and waits until the client has acknowledged
/// every byte of the socket, or it makes no progress for `patience` (a
/// client that stopped reading), or the socket fails. The caller then
/// closes it.
pub async fn settle(fd: BorrowedFd<'_>, patience: Duration) {
    let _ = socket2::SockRef::from(&fd).shutdown(std::net::Shutdown::Write);
    let mut last = usize::MAX;
    let mut since = Instant::now();
    loop {
        let left = match unacked(fd) {
            Some(0) | None => return,
            Some(n) => n,
        };
        let now = Instant::now();
        if left != last {
            last = left;
            since = now;
        } else if now >= since + patience {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    /// The wait ends when the peer has read (and so acknowledged) the
    /// last byte, not before, and the FIN reaches it after the data.
    #[test]
    fn settle_returns_once_the_peer_has_acknowledged_everything() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let mut client = std::net::TcpStream::connect(addr).expect("connect");
        let (mut server, _) = l.accept().expect("accept");
        server.set_nonblocking(true).expect("nonblocking");
        // More than the loopback socket buffers hold at once, so part of
        // it waits in the send queue until the client reads.
        let data = vec![7u8; 4 << 20];
        let mut sent = 0;
        while sent < data.len() {
            match server.write(&data[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        assert!(unacked(server.as_fd()).unwrap_or(0) > 0, "nothing queued");
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            let _ = client.read_to_end(&mut got);
            got.len()
        });
        rt.block_on(settle(server.as_fd(), Duration::from_secs(5)));
        assert_eq!(unacked(server.as_fd()), Some(0));
        drop(server);
        assert_eq!(reader.join().expect("reader"), sent);
    }
}
