//! Listening sockets: bound here (one SO_REUSEPORT socket per worker per
//! address), or inherited as open descriptors from whoever started Stoa:
//!
//! - systemd's socket activation (sd_listen_fds(3)): `LISTEN_PID` is our
//!   pid and `LISTEN_FDS` = n, so descriptors 3 .. 3+n are listening
//!   sockets (`LISTEN_FDNAMES` names them, colon-separated);
//! - the Stoa that started this one on SIGUSR2 (`upgrade.rs`):
//!   `STOA_LISTEN_FDS` lists the descriptors, comma-separated.
//!
//! An inherited socket serves the configured address it is bound to
//! (`getsockname`); a configured address with port 0 takes an inherited
//! socket on the same IP, whatever its port (port 0 means "any", and a new
//! binary must keep its predecessor's port). A configured address with no
//! inherited socket is bound as usual. A socket from systemd that matches no
//! configured address refuses the start: connections would queue on it
//! unanswered. One from an upgrade is closed (the configuration dropped
//! that address; the old process serves it until it stops).

use crate::server::StartError;
use crate::worker;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The descriptors a new binary started on SIGUSR2 finds its listeners in.
pub const UPGRADE_FDS_VAR: &str = "STOA_LISTEN_FDS";

/// sd_listen_fds(3): the first passed descriptor.
const SD_LISTEN_FDS_START: RawFd = 3;

/// Who handed the sockets over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Systemd,
    Upgrade,
}

/// Sockets this process was started with, not yet given to an address.
pub struct Inherited {
    origin: Origin,
    socks: Vec<(TcpListener, SocketAddr, String)>,
}

impl Inherited {
    /// Takes the inherited sockets named by the environment, marks them
    /// close-on-exec and removes the variables, so that CGI scripts and pool
    /// processes neither inherit the sockets nor believe they were passed
    /// some. Call before any thread starts: it changes the environment.
    pub fn from_env() -> Result<Inherited, StartError> {
        let var = |k: &str| std::env::var(k).ok();
        let listed = fds_from_env(
            var("LISTEN_PID").as_deref(),
            var("LISTEN_FDS").as_deref(),
            var("LISTEN_FDNAMES").as_deref(),
            var(UPGRADE_FDS_VAR).as_deref(),
            std::process::id(),
        );
        for k in [
            "LISTEN_PID",
            "LISTEN_FDS",
            "LISTEN_FDNAMES",
            UPGRADE_FDS_VAR,
        ] {
            std::env::remove_var(k);
        }
        let (origin, fds) = listed.map_err(StartError::Inherited)?;
        let mut socks = Vec::with_capacity(fds.len());
        for (fd, label) in fds {
            socks.push(adopt(fd, &label).map_err(StartError::Inherited)?);
        }
        Ok(Inherited { origin, socks })
    }

    /// Removes and returns the sockets that serve `addr`.
    fn take_for(&mut self, addr: SocketAddr) -> Vec<(TcpListener, SocketAddr, String)> {
        let have: Vec<SocketAddr> = self.socks.iter().map(|(_, a, _)| *a).collect();
        let Some(port) = matching_port(addr, &have) else {
            return Vec::new();
        };
        let mut taken = Vec::new();
        let mut rest = Vec::new();
        for s in self.socks.drain(..) {
            if s.1.ip() == addr.ip() && s.1.port() == port {
                taken.push(s);
            } else {
                rest.push(s);
            }
        }
        self.socks = rest;
        taken
    }
}

/// The port of the inherited sockets that serve configured address `want`
/// (all of them share it), if any do: the same address, or for port 0 the
/// same IP.
fn matching_port(want: SocketAddr, have: &[SocketAddr]) -> Option<u16> {
    if have.contains(&want) {
        return Some(want.port());
    }
    if want.port() == 0 {
        return have.iter().find(|a| a.ip() == want.ip()).map(|a| a.port());
    }
    None
}

/// Which descriptors the environment passes, and their labels for logs.
fn fds_from_env(
    listen_pid: Option<&str>,
    listen_fds: Option<&str>,
    names: Option<&str>,
    upgrade: Option<&str>,
    pid: u32,
) -> Result<(Origin, Vec<(RawFd, String)>), String> {
    if let Some(list) = upgrade {
        let mut out = Vec::new();
        for part in list.split(',').filter(|p| !p.is_empty()) {
            let fd: RawFd = part
                .trim()
                .parse()
                .map_err(|_| format!("{UPGRADE_FDS_VAR}={list}: {part:?} is not a descriptor"))?;
            if fd < SD_LISTEN_FDS_START {
                return Err(format!("{UPGRADE_FDS_VAR}={list}: {fd} is stdio"));
            }
            out.push((fd, format!("fd {fd} from the previous binary")));
        }
        return Ok((Origin::Upgrade, out));
    }
    // sd_listen_fds(3): the variables are for the process whose pid they
    // name; anyone else (a child that inherited them) ignores them.
    let ours = listen_pid.and_then(|p| p.trim().parse::<u32>().ok()) == Some(pid);
    let Some(n) = listen_fds.filter(|_| ours) else {
        return Ok((Origin::Systemd, Vec::new()));
    };
    let n: RawFd = n
        .trim()
        .parse()
        .ok()
        .filter(|n| (0..=4096).contains(n))
        .ok_or_else(|| format!("LISTEN_FDS={n}: not a number of descriptors"))?;
    let names: Vec<&str> = names.map(|s| s.split(':').collect()).unwrap_or_default();
    let out = (0..n)
        .map(|i| {
            let fd = SD_LISTEN_FDS_START + i;
            let label = match names.get(i as usize).filter(|s| !s.is_empty()) {
                Some(name) => format!("fd {fd} ({name}) from systemd"),
                None => format!("fd {fd} from systemd"),
            };
            (fd, label)
        })
        .collect();
    Ok((Origin::Systemd, out))
}

/// Takes ownership of descriptor `fd`, which must be a listening TCP socket.
fn adopt(fd: RawFd, label: &str) -> Result<(TcpListener, SocketAddr, String), String> {
    // SAFETY: fcntl(F_GETFD) only reads the descriptor's flags; it fails
    // with EBADF when `fd` is not open, which is what we check.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        return Err(format!("{label}: not an open descriptor"));
    }
    // SAFETY: `fd` is open (checked above) and was handed to this process
    // to own (LISTEN_FDS or STOA_LISTEN_FDS); nothing else here uses it.
    let sock = Socket::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let bad = |what: &str| format!("{label}: {what}");
    sock.set_cloexec(true)
        .map_err(|e| bad(&format!("FD_CLOEXEC: {e}")))?;
    let addr = sock
        .local_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .ok_or_else(|| bad("not an IPv4 or IPv6 socket"))?;
    if sock.r#type().ok() != Some(Type::STREAM) || !sock.is_listener().unwrap_or(false) {
        return Err(bad(&format!("{addr} is not a listening TCP socket")));
    }
    // systemd passes blocking sockets; the workers' accept loops need
    // non-blocking ones.
    sock.set_nonblocking(true)
        .map_err(|e| bad(&format!("O_NONBLOCK: {e}")))?;
    Ok((sock.into(), addr, label.to_owned()))
}

/// Every worker's listeners and one descriptor of each socket for a new
/// binary.
pub struct Listeners {
    /// `per_worker[w]`: worker w's sockets, each with its configured
    /// address when it speaks TLS (the key to its certificates in every
    /// later runtime).
    pub per_worker: Vec<Vec<worker::Listener>>,
    /// One descriptor of every socket, kept by the main thread to hand to a
    /// new binary on SIGUSR2. Dropped when the server stops, so that a
    /// stopping server refuses new connections.
    pub handles: Vec<OwnedFd>,
}

/// Opens or adopts the sockets for `wanted` (address, speaks TLS) and
/// spreads them over `workers`. Inherited sockets are shared when there are
/// fewer than workers (systemd passes one per address: every worker accepts
/// on it); bound ones are one SO_REUSEPORT socket per worker.
pub fn acquire(
    wanted: &[(SocketAddr, bool)],
    workers: usize,
    mut inherited: Inherited,
) -> Result<Listeners, StartError> {
    let workers = workers.max(1);
    let mut out = Listeners {
        per_worker: (0..workers).map(|_| Vec::new()).collect(),
        handles: Vec::new(),
    };
    for &(addr, is_tls) in wanted {
        let adopted = inherited.take_for(addr);
        let socks = if adopted.is_empty() {
            bind_all(addr, workers)?
        } else {
            for (_, a, label) in &adopted {
                tracing::info!("listening on {a}: {label}");
            }
            adopted.into_iter().map(|(s, _, _)| s).collect()
        };
        if socks.is_empty() {
            continue;
        }
        for s in &socks {
            let h = s.try_clone().map_err(|e| StartError::Bind(addr, e))?;
            out.handles.push(h.into());
        }
        // Fewer sockets than workers (systemd's one): the others share them.
        let mut shared = Vec::new();
        for j in socks.len()..workers {
            let s = socks[j % socks.len()]
                .try_clone()
                .map_err(|e| StartError::Bind(addr, e))?;
            shared.push(s);
        }
        for (j, socket) in socks.into_iter().chain(shared).enumerate() {
            out.per_worker[j % workers].push(worker::Listener {
                socket,
                tls: is_tls.then_some(addr),
            });
        }
    }
    for (_, a, label) in inherited.socks {
        match inherited.origin {
            Origin::Systemd => {
                return Err(StartError::Inherited(format!(
                    "{label}: {a} is not a configured `listen` or `tls.listen` address"
                )))
            }
            Origin::Upgrade => {
                tracing::info!("{a} ({label}) is no longer configured: not listening on it")
            }
        }
    }
    Ok(out)
}

/// The addresses served, with their schemes, from the first worker's
/// listeners (every worker has a socket of each address, and the others'
/// share its port). A TLS address configured with port 0 learns its port
/// here, for redirects to HTTPS.
pub fn bound(per_worker: &[Vec<worker::Listener>]) -> Vec<(&'static str, SocketAddr)> {
    let mut out = Vec::new();
    for l in per_worker.first().into_iter().flatten() {
        if let Ok(a) = l.socket.local_addr() {
            let scheme = if l.tls.is_some() { "https" } else { "http" };
            // More inherited sockets than workers: a worker has several.
            if out.contains(&(scheme, a)) {
                continue;
            }
            out.push((scheme, a));
            if l.tls.is_some_and(|c| c.port() == 0) {
                crate::route::set_bound_https_port(a.port());
            }
        }
    }
    out
}

/// Opens one SO_REUSEPORT listener per worker on `addr`. With port 0 the
/// first socket picks the port and the others join it.
fn bind_all(addr: SocketAddr, n: usize) -> Result<Vec<TcpListener>, StartError> {
    let mut out = Vec::with_capacity(n);
    let mut addr = addr;
    for _ in 0..n {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
            .map_err(|e| StartError::Bind(addr, e))?;
        s.set_reuse_address(true)
            .map_err(|e| StartError::Bind(addr, e))?;
        // One listener per worker: the kernel spreads connections across
        // them with no shared accept lock (SO_REUSEPORT).
        s.set_reuse_port(true)
            .map_err(|e| StartError::Bind(addr, e))?;
        if addr.is_ipv6() {
            s.set_only_v6(true).map_err(|e| StartError::Bind(addr, e))?;
        }
        s.set_nonblocking(true)
            .map_err(|e| StartError::Bind(addr, e))?;
        s.bind(&addr.into())
            .map_err(|e| StartError::Bind(addr, e))?;
        s.listen(4096).map_err(|e| StartError::Bind(addr, e))?;
        if addr.port() == 0 {
            if let Some(a) = s.local_addr().ok().and_then(|a| a.as_socket()) {
                addr = a;
            }
        }
        out.push(s.into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd;

    fn a(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    #[test]
    fn listen_fds_for_another_pid_are_ignored_per_sd_listen_fds_3() {
        let r = fds_from_env(Some("42"), Some("2"), None, None, 7).expect("ok");
        assert_eq!(r, (Origin::Systemd, vec![]));
        let none = fds_from_env(None, Some("2"), None, None, 7).expect("ok");
        assert!(none.1.is_empty());
    }

    #[test]
    fn listen_fds_for_our_pid_start_at_descriptor_3_with_their_names() {
        let (o, fds) = fds_from_env(Some("7"), Some("2"), Some("web:"), None, 7).expect("ok");
        assert_eq!(o, Origin::Systemd);
        assert_eq!(
            fds,
            vec![
                (3, "fd 3 (web) from systemd".to_owned()),
                (4, "fd 4 from systemd".to_owned())
            ]
        );
        assert!(fds_from_env(Some("7"), Some("two"), None, None, 7).is_err());
    }

    #[test]
    fn an_upgrade_names_its_descriptors_and_refuses_stdio() {
        let (o, fds) = fds_from_env(None, None, None, Some("5,9"), 7).expect("ok");
        assert_eq!(o, Origin::Upgrade);
        assert_eq!(fds.iter().map(|f| f.0).collect::<Vec<_>>(), vec![5, 9]);
        assert!(fds_from_env(None, None, None, Some("1"), 7).is_err());
        assert!(fds_from_env(None, None, None, Some("x"), 7).is_err());
    }

    #[test]
    fn an_address_takes_its_own_socket_and_port_0_takes_any_port_on_its_ip() {
        let have = [a("127.0.0.1:8080"), a("[::1]:8443")];
        assert_eq!(matching_port(a("127.0.0.1:8080"), &have), Some(8080));
        assert_eq!(matching_port(a("127.0.0.1:0"), &have), Some(8080));
        assert_eq!(matching_port(a("[::1]:0"), &have), Some(8443));
        assert_eq!(matching_port(a("127.0.0.1:9090"), &have), None);
        assert_eq!(matching_port(a("0.0.0.0:8080"), &have), None);
    }

    /// A socket as systemd passes it: bound, listening, blocking.
    fn listening(addr: &str) -> (RawFd, SocketAddr) {
        let l = std::net::TcpListener::bind(addr).expect("bind");
        let local = l.local_addr().expect("addr");
        (l.into_raw_fd(), local)
    }

    #[test]
    fn one_inherited_socket_is_shared_by_every_worker_and_marked_cloexec() {
        let (fd, local) = listening("127.0.0.1:0");
        let inherited = Inherited {
            origin: Origin::Systemd,
            socks: vec![adopt(fd, "fd test").expect("adopt")],
        };
        // SAFETY: F_GETFD on a descriptor this test owns.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert_ne!(flags & libc::FD_CLOEXEC, 0);
        let l = acquire(&[(a("127.0.0.1:0"), false)], 3, inherited).expect("acquire");
        assert_eq!(bound(&l.per_worker), vec![("http", local)]);
        assert_eq!(l.handles.len(), 1);
        for w in &l.per_worker {
            assert_eq!(w.len(), 1);
            assert_eq!(w[0].socket.local_addr().ok(), Some(local));
        }
    }

    #[test]
    fn an_inherited_socket_from_systemd_that_no_address_wants_refuses_the_start() {
        let (fd, _) = listening("127.0.0.1:0");
        let inherited = Inherited {
            origin: Origin::Systemd,
            socks: vec![adopt(fd, "fd test").expect("adopt")],
        };
        let err = acquire(&[(a("127.0.0.2:0"), false)], 1, inherited)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("not a configured"), "{err}");
    }

    #[test]
    fn a_descriptor_that_is_not_a_listening_socket_is_refused() {
        let f = std::fs::File::open("/dev/null").expect("open");
        let err = adopt(f.into_raw_fd(), "fd x").expect_err("refused");
        assert!(err.contains("fd x"), "{err}");
    }
}
