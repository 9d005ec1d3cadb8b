//! Unix-domain socket listeners (`listen = ["unix:/run/stoa/http.sock"]`):
//! the socket file made at start (a stale one from an earlier run
//! replaced, never a live one or anything that is not a socket), its
//! mode and owner set, the accept loop, and the file removed at stop.
//! `listen::acquire` calls [`bind`] for the paths no inherited socket
//! serves (as root under a privileged parent, which then passes the
//! socket to its server process as it passes TCP ones), and the process
//! that made a file calls [`remove`] at its stop (`Lifecycle`).
//!
//! A connection accepted here is served by the same code as a TCP one:
//! its descriptor travels as a `tokio::net::TcpStream`. Every operation
//! the connection loops use on it (read, write, writev, sendfile,
//! shutdown, readiness) is the same system call for both families; the
//! TCP-only options (TCP_NODELAY, TCP_CORK) fail on it and are ignored as
//! they already are; addresses are never read from it (`local_addr` gives
//! an error, read as "unknown"). So the plaintext TCP path gains no
//! variant to match on, and a Unix connection costs nothing extra per
//! request.

use crate::config::{Runtime, UnixListen};
use crate::local::{Shared, Worker};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::sync::watch;

/// The peer of a Unix-socket connection without a PROXY header: no
/// client address exists, so logs and CGI see the unspecified address,
/// `0.0.0.0` port 0 (documented in docs/CONFIG.md). A PROXY header from
/// the balancer in front gives the real one.
pub const PEER: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));

/// Makes the listening sockets of `cfg`, each with its mode and owner.
/// Root is still held here, so the owner can be anyone.
pub fn bind(cfg: &UnixListen) -> Result<Vec<(PathBuf, UnixListener)>, String> {
    let owner = match &cfg.owner {
        None => None,
        Some((user, group)) => {
            let a = crate::privileges::Account::lookup(user)?;
            let gid = match group {
                None => a.gid,
                Some(g) => group_id(g)?,
            };
            Some((a.uid, gid))
        }
    };
    let mut out = Vec::new();
    for path in &cfg.paths {
        let l =
            bind_one(path).map_err(|e| format!("cannot listen on unix:{}: {e}", path.display()))?;
        let fail = |what: &str, e: io::Error| {
            let _ = std::fs::remove_file(path);
            format!("unix:{}: {what}: {e}", path.display())
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(cfg.mode))
            .map_err(|e| fail("mode", e))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).map_err(|e| fail("owner", e))?;
        }
        l.set_nonblocking(true)
            .map_err(|e| fail("non-blocking", e))?;
        out.push((path.clone(), l));
    }
    Ok(out)
}

/// Binds `path`, replacing a stale socket (nobody accepts on it: left by a
/// run that did not stop cleanly). A live one, or a file that is not a
/// socket, is an error: never delete what another server or the operator
/// still uses.
fn bind_one(path: &Path) -> io::Result<UnixListener> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => match UnixStream::connect(path) {
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    "a server is accepting on it",
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                std::fs::remove_file(path)?;
            }
            Err(e) => return Err(e),
        },
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "exists and is not a socket",
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    UnixListener::bind(path)
}

fn group_id(name: &str) -> Result<libc::gid_t, String> {
    let c = std::ffi::CString::new(name).map_err(|_| format!("group `{name}`: contains a NUL"))?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: an all-zero group is a valid value for getgrnam_r to
    // overwrite (pointers null, numbers 0).
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::group = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call: the name is
    // NUL-terminated, `gr` and `buf` are ours with their true sizes.
    let rc =
        unsafe { libc::getgrnam_r(c.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc != 0 {
        return Err(format!(
            "group `{name}`: {}",
            io::Error::from_raw_os_error(rc)
        ));
    }
    if found.is_null() {
        return Err(format!("group `{name}`: no such group"));
    }
    Ok(gr.gr_gid)
}

/// Removes the socket files at stop (the listeners are closed by then).
/// A file the running user may not remove (its directory is root's) is
/// left for the next start, which replaces it as stale.
pub fn remove(paths: &[PathBuf]) {
    for p in paths {
        if let Err(e) = std::fs::remove_file(p) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(
                    "unix:{}: not removed ({e}); the next start replaces it",
                    p.display()
                );
            }
        }
    }
}

/// Accepts on a Unix listener shared by every worker (the kernel wakes
/// each; the ones that find nothing try again).
pub async fn accept_loop(
    listener: AsyncFd<UnixListener>,
    proxy_protocol: bool,
    runtime: watch::Receiver<Arc<Runtime>>,
    worker: Rc<Worker>,
    shared: Arc<Shared>,
) {
    loop {
        let mut ready = match listener.readable().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("accept (unix): {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (s, _) = match ready.try_io(|l| l.get_ref().accept()) {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!("accept (unix): {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(_would_block) => continue,
        };
        let stream = s.set_nonblocking(true).and_then(|()| {
            tokio::net::TcpStream::from_std(std::net::TcpStream::from(OwnedFd::from(s)))
        });
        match stream {
            Ok(t) => crate::worker::serve_unix(t, proxy_protocol, &runtime, &worker, &shared),
            Err(e) => tracing::warn!("accept (unix): {e}"),
        }
    }
}
