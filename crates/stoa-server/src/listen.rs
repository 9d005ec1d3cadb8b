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
//! binary must keep its predecessor's port). An inherited Unix-domain
//! socket serves the `unix:` listener of its path. A configured address
//! with no inherited socket is bound as usual (`unix_listen` makes the
//! Unix ones, with their mode and owner). A socket from systemd that
//! matches no configured address refuses the start: connections would
//! queue on it unanswered. One from an upgrade is closed (the
//! configuration dropped that address; the old process serves it until it
//! stops).
//!
//! Whether a listener's connections begin with a PROXY protocol header is
//! decided here from the configured address it serves, so the flag is the
//! same whichever way its socket came.

use crate::config::UnixListen;
use crate::server::StartError;
use crate::worker;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

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

/// An adopted listening socket and the address it is bound to.
#[derive(Debug)]
enum Adopted {
    Tcp(TcpListener, SocketAddr),
    Unix(UnixListener, PathBuf),
}

impl Adopted {
    fn describe(&self) -> String {
        match self {
            Adopted::Tcp(_, a) => a.to_string(),
            Adopted::Unix(_, p) => format!("unix:{}", p.display()),
        }
    }
}

/// Sockets this process was started with, not yet given to an address.
pub struct Inherited {
    origin: Origin,
    socks: Vec<(Adopted, String)>,
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
        let have: Vec<SocketAddr> = self
            .socks
            .iter()
            .filter_map(|(s, _)| match s {
                Adopted::Tcp(_, a) => Some(*a),
                Adopted::Unix(..) => None,
            })
            .collect();
        let Some(port) = matching_port(addr, &have) else {
            return Vec::new();
        };
        let mut taken = Vec::new();
        let mut rest = Vec::new();
        for s in self.socks.drain(..) {
            match s {
                (Adopted::Tcp(l, a), label) if a.ip() == addr.ip() && a.port() == port => {
                    taken.push((l, a, label))
                }
                other => rest.push(other),
            }
        }
        self.socks = rest;
        taken
    }

    /// Removes and returns the sockets bound to Unix path `path`.
    fn take_unix(&mut self, path: &std::path::Path) -> Vec<(UnixListener, String)> {
        let mut taken = Vec::new();
        let mut rest = Vec::new();
        for s in self.socks.drain(..) {
            match s {
                (Adopted::Unix(l, p), label) if p == path => taken.push((l, label)),
                other => rest.push(other),
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

/// Takes ownership of descriptor `fd`, which must be a listening TCP or
/// Unix-domain stream socket.
fn adopt(fd: RawFd, label: &str) -> Result<(Adopted, String), String> {
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
    let local = sock
        .local_addr()
        .map_err(|e| bad(&format!("getsockname: {e}")))?;
    let what = match (local.as_socket(), local.as_pathname()) {
        (Some(a), _) => a.to_string(),
        (None, Some(p)) => format!("unix:{}", p.display()),
        (None, None) => return Err(bad("not an IPv4, IPv6 or Unix path socket")),
    };
    if sock.r#type().ok() != Some(Type::STREAM) || !sock.is_listener().unwrap_or(false) {
        return Err(bad(&format!("{what} is not a listening stream socket")));
    }
    // systemd passes blocking sockets; the workers' accept loops need
    // non-blocking ones.
    sock.set_nonblocking(true)
        .map_err(|e| bad(&format!("O_NONBLOCK: {e}")))?;
    let adopted = match (local.as_socket(), local.as_pathname()) {
        (Some(a), _) => Adopted::Tcp(sock.into(), a),
        (None, Some(p)) => Adopted::Unix(UnixListener::from(OwnedFd::from(sock)), p.to_owned()),
        (None, None) => return Err(bad("not an IPv4, IPv6 or Unix path socket")),
    };
    Ok((adopted, label.to_owned()))
}

/// What a configuration listens on: TCP addresses (speaks TLS, PROXY
/// header first) and Unix paths (PROXY header first), with the mode and
/// owner a Unix socket made here gets.
pub(crate) struct Wanted {
    pub tcp: Vec<(SocketAddr, bool, bool)>,
    /// TLS addresses that speak HTTP/3 too: a UDP socket per worker.
    pub h3: Vec<SocketAddr>,
    pub unix: Vec<(PathBuf, bool)>,
    pub unix_cfg: UnixListen,
}

/// Every worker's listeners and one descriptor of each socket for a new
/// binary.
pub struct Listeners {
    /// `per_worker[w]`: worker w's sockets, each TCP one with its
    /// configured address when it speaks TLS (the key to its certificates
    /// in every later runtime).
    pub(crate) per_worker: Vec<worker::Sockets>,
    /// One descriptor of every socket, kept by the main thread to hand to a
    /// new binary on SIGUSR2. Dropped when the server stops, so that a
    /// stopping server refuses new connections.
    pub handles: Vec<OwnedFd>,
    /// The Unix socket files this process answers for: made here, or
    /// handed over by a predecessor (not systemd's: they are systemd's),
    /// for whoever can to remove at stop.
    pub made: Vec<PathBuf>,
}

/// Opens or adopts the sockets for `wanted` (address, speaks TLS) and
/// spreads them over `workers`. Inherited sockets are shared when there are
/// fewer than workers (systemd passes one per address: every worker accepts
/// on it); bound ones are one SO_REUSEPORT socket per worker.
pub(crate) fn acquire(
    wanted: &Wanted,
    workers: usize,
    mut inherited: Inherited,
) -> Result<Listeners, StartError> {
    let workers = workers.max(1);
    let mut out = Listeners {
        per_worker: (0..workers).map(|_| worker::Sockets::default()).collect(),
        handles: Vec::new(),
        made: Vec::new(),
    };
    // Every address to bind is probed before any is bound: this process's
    // own sockets on a port (127.0.0.1:8080 beside 0.0.0.0:8080) are no
    // reason to refuse.
    let adopted: Vec<_> = wanted
        .tcp
        .iter()
        .map(|&(addr, _, _)| inherited.take_for(addr))
        .collect();
    for (&(addr, _, _), a) in wanted.tcp.iter().zip(&adopted) {
        if a.is_empty() {
            refuse_if_taken(addr).map_err(|e| StartError::Bind(addr, e))?;
        }
    }
    for (&(addr, is_tls, proxy_protocol), adopted) in wanted.tcp.iter().zip(adopted) {
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
            defer_accept(s);
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
        if is_tls && wanted.h3.contains(&addr) {
            bind_udp(addr, &socks, &mut out.per_worker);
        }
        for (j, socket) in socks.into_iter().chain(shared).enumerate() {
            out.per_worker[j % workers].tcp.push(worker::Listener {
                socket,
                tls: is_tls.then_some(addr),
                proxy_protocol,
            });
        }
    }
    // Unix sockets: one per path (no SO_REUSEPORT for them), every worker
    // accepting on a descriptor of it.
    let mut to_bind = wanted.unix_cfg.clone();
    to_bind.paths.clear();
    let mut unix: Vec<(UnixListener, bool)> = Vec::new();
    for (path, proxy_protocol) in &wanted.unix {
        let mut adopted = inherited.take_unix(path).into_iter();
        match adopted.next() {
            Some((l, label)) => {
                tracing::info!("listening on unix:{}: {label}", path.display());
                // A predecessor's file is this process's to remove once it
                // took over (the predecessor leaves it); systemd's stays
                // systemd's (`RemoveOnStop=`).
                if inherited.origin == Origin::Upgrade {
                    out.made.push(path.clone());
                }
                unix.push((l, *proxy_protocol));
            }
            None => to_bind.paths.push(path.clone()),
        }
    }
    let made = if to_bind.paths.is_empty() {
        Vec::new()
    } else {
        crate::unix_listen::bind(&to_bind).map_err(StartError::Unix)?
    };
    for (path, l) in made {
        let proxy_protocol = wanted.unix.iter().any(|(p, pp)| *p == path && *pp);
        out.made.push(path);
        unix.push((l, proxy_protocol));
    }
    for (l, proxy_protocol) in unix {
        let unix_err = |e: std::io::Error| StartError::Unix(format!("unix listener: {e}"));
        out.handles.push(l.try_clone().map_err(unix_err)?.into());
        for w in out.per_worker.iter_mut() {
            w.unix.push(worker::UnixListener {
                socket: l.try_clone().map_err(unix_err)?,
                proxy_protocol,
            });
        }
    }
    for (s, label) in inherited.socks {
        let a = s.describe();
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
pub(crate) fn bound(per_worker: &[worker::Sockets]) -> Vec<(&'static str, SocketAddr)> {
    let mut out = Vec::new();
    for l in per_worker.iter().take(1).flat_map(|w| &w.tcp) {
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

/// Lets the kernel hand over a connection only once its first bytes have
/// arrived (TCP_DEFER_ACCEPT; nginx's `listen ... deferred`, Apache's
/// default `AcceptFilter http data`). HTTP and TLS clients speak first, so
/// the accept and the first read then come with one wake-up instead of two,
/// and the connection loop reads at once without asking epoll (conn/h1.rs:
/// a connection per request costs fewer wake-ups and context switches,
/// docs/BENCHMARKS.md "A connection per request"). A client that connects
/// and stays silent is handed over all the same after about a second (the
/// kernel completes it on the retransmitted SYN-ACK's ACK), and
/// `header_timeout` runs from then. Inherited sockets get it too; a
/// failure (not TCP) changes nothing.
fn defer_accept(s: &TcpListener) {
    use std::os::fd::AsRawFd;
    let secs: libc::c_int = 1;
    // SAFETY: a valid descriptor (borrowed from `s` for the call) and a
    // pointer to a c_int that lives across it, with its size.
    let _ = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&secs as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// Opens one SO_REUSEPORT listener per worker on `addr`. With port 0 the
/// first socket picks the port and the others join it.
/// HTTP/3's UDP sockets for the TLS address `addr`, whose TCP sockets
/// are `tcp`: one per worker, SO_REUSEPORT (the kernel keeps a client's
/// datagrams on one of them), on the port the TCP ones have (what
/// Alt-Svc advertises). A failure is logged and leaves the address on
/// TCP only: HTTP/3 is an addition, not a reason to refuse to start.
fn bind_udp(addr: SocketAddr, tcp: &[TcpListener], per_worker: &mut [worker::Sockets]) {
    let Some(local) = tcp.first().and_then(|s| s.local_addr().ok()) else {
        return;
    };
    for w in per_worker.iter_mut() {
        match udp_socket(local) {
            Ok(socket) => w.udp.push(worker::UdpListener { socket, tls: addr }),
            Err(e) => {
                tracing::error!("h3: cannot bind UDP {local}: {e} (serving TCP only)");
                for w in per_worker.iter_mut() {
                    w.udp.clear();
                }
                return;
            }
        }
    }
}

fn udp_socket(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// Fails with `EADDRINUSE` when something already listens on `addr`. The
/// workers' sockets carry SO_REUSEPORT, and the kernel lets any other
/// process of the same user whose sockets carry it too (a second Stoa
/// started by mistake, an old one never stopped) join the port's group:
/// both would start, and each take part of the connections with its own
/// configuration. A probe without SO_REUSEPORT is refused by any listener
/// there, so Stoa fails to start as nginx does ("Address already in use").
/// A binary upgrade adopts its predecessor's sockets and binds nothing.
fn refuse_if_taken(addr: SocketAddr) -> std::io::Result<()> {
    if addr.port() == 0 {
        return Ok(());
    }
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // Not refused for a closed predecessor's connections in TIME_WAIT.
    probe.set_reuse_address(true)?;
    if addr.is_ipv6() {
        probe.set_only_v6(true)?;
    }
    probe.bind(&addr.into())
}

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

    fn tcp(addrs: &[(SocketAddr, bool, bool)]) -> Wanted {
        Wanted {
            tcp: addrs.to_vec(),
            h3: Vec::new(),
            unix: Vec::new(),
            unix_cfg: UnixListen {
                paths: Vec::new(),
                mode: 0o666,
                owner: None,
            },
        }
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
        let l = acquire(&tcp(&[(a("127.0.0.1:0"), false, false)]), 3, inherited).expect("acquire");
        assert_eq!(bound(&l.per_worker), vec![("http", local)]);
        assert_eq!(l.handles.len(), 1);
        for w in &l.per_worker {
            assert_eq!(w.tcp.len(), 1);
            assert_eq!(w.tcp[0].socket.local_addr().ok(), Some(local));
        }
    }

    #[test]
    fn an_inherited_socket_from_systemd_that_no_address_wants_refuses_the_start() {
        let (fd, _) = listening("127.0.0.1:0");
        let inherited = Inherited {
            origin: Origin::Systemd,
            socks: vec![adopt(fd, "fd test").expect("adopt")],
        };
        let err = acquire(&tcp(&[(a("127.0.0.2:0"), false, false)]), 1, inherited)
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

    /// A Unix socket passed by a previous binary (or systemd's
    /// `ListenStream=/path`) serves the `unix:` listener of its path, with
    /// that listener's PROXY protocol setting, and is not made again; its
    /// file is now this process's to remove at stop, as nginx's new master
    /// takes over the old one's sockets.
    #[test]
    fn an_inherited_unix_socket_serves_its_path_with_its_proxy_protocol_flag() {
        let dir = std::env::temp_dir().join(format!("stoa-listen-unix-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("http.sock");
        let l = UnixListener::bind(&path).expect("bind");
        let inherited = Inherited {
            origin: Origin::Upgrade,
            socks: vec![adopt(l.into_raw_fd(), "fd test").expect("adopt")],
        };
        let mut want = tcp(&[]);
        want.unix = vec![(path.clone(), true)];
        want.unix_cfg.paths = vec![path.clone()];
        let got = acquire(&want, 2, inherited).expect("acquire");
        assert_eq!(got.made, vec![path.clone()]);
        assert_eq!(got.handles.len(), 1);
        for w in &got.per_worker {
            assert_eq!(w.unix.len(), 1);
            assert!(w.unix[0].proxy_protocol);
            let local = w.unix[0].socket.local_addr().expect("addr");
            assert_eq!(local.as_pathname(), Some(path.as_path()));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A Unix path nobody passed is made here, with the configured mode,
    /// and listed for removal at stop.
    #[test]
    fn a_unix_path_not_inherited_is_bound_with_its_mode_and_listed_as_made() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("stoa-listen-made-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("http.sock");
        let mut want = tcp(&[]);
        want.unix = vec![(path.clone(), false)];
        want.unix_cfg = UnixListen {
            paths: vec![path.clone()],
            mode: 0o660,
            owner: None,
        };
        let inherited = Inherited {
            origin: Origin::Systemd,
            socks: Vec::new(),
        };
        let got = acquire(&want, 3, inherited).expect("acquire");
        assert_eq!(got.made, vec![path.clone()]);
        assert!(got
            .per_worker
            .iter()
            .all(|w| w.unix.len() == 1 && !w.unix[0].proxy_protocol));
        let mode = std::fs::metadata(&path)
            .expect("socket file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o660);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
