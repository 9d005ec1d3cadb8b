//! The privileged parent and its broker (nginx's master process).
//!
//! Started as root with a `user` to run as, `stoa serve` is two
//! processes. The parent stays root and never reads a request: it loads
//! the configuration (so that a key only root may read stays that way),
//! gets the listeners (bound, or systemd's, or a previous binary's: see
//! `listen`), then starts the server process by executing its own binary
//! again (`/proc/self/exe`) with the listening sockets inherited and one
//! end of a Unix socket pair, the broker, named in [`BROKER_ENV`]. The
//! child becomes the user between fork and exec, so the process that
//! parses requests never runs as root, and it builds its runtime from the
//! parent's [`Recorded`] bundle: the config text and the certificates and
//! keys, read by root. The parent is the unit's main pid: its
//! `Lifecycle` speaks to systemd and upgrades the binary on SIGUSR2.
//!
//! Over the broker the child asks, the parent answers: a fresh bundle (at
//! start and on every reload: SIGHUP to either process), a log file
//! opened for appending ([`open_append`]: created by root, given to the
//! user, passed back with `SCM_RIGHTS`), and events the parent acts on
//! (`lifecycle::Event`, each with a status line, all handled in one place:
//! `Parent::on_event`). The parent forwards SIGHUP, SIGUSR1, SIGQUIT,
//! SIGTERM and SIGINT to the child, starts a new binary on SIGUSR2 (its
//! own, or its child's passed up), and exits with the child's status; a
//! child that dies unasked is logged and the parent exits non-zero, so
//! that a supervisor (systemd) restarts both.
//!
//! Not started as root, or with `user = "root"` written out, there is no
//! parent: one process, and [`open_append`] opens the file itself.
//!
//! The same split checks a configuration: `stoa check` run as root loads
//! the file as root, then again from that bundle in a child that has
//! become the user ([`check`]), so a document root only root can read is
//! an error there as it would be when serving.

use crate::config::{self, ConfigError, Files, Overrides, Recorded, Runtime};
use crate::lifecycle::{Event, Lifecycle};
use crate::listen::Inherited as InheritedSockets;
use crate::privileges::Account;
use crate::server::{Source, StartError};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The broker's descriptor in a child: its presence says "you are the
/// server (or checking) child of a privileged parent".
const BROKER_ENV: &str = "STOA_BROKER_FD";
/// The inherited listeners of a server child: `FD,WORKER,TLS,PROXY`
/// entries separated by spaces, TLS being the configured address or `-`,
/// PROXY `proxy` when connections begin with a PROXY protocol header, else
/// `-`. TCP and Unix-domain sockets travel alike; the child tells them
/// apart by the socket's own address family.
const LISTENERS_ENV: &str = "STOA_LISTENERS";
/// The config file the parent loaded (absent: none, `stoa serve DIR`), so
/// that the child loads the same one whatever it can see from its working
/// directory.
const CONFIG_ENV: &str = "STOA_CONFIG";

// Frames: kind (1 byte, 3 unused), payload length (u32 LE), payload; at
// most one descriptor rides with a frame.
const ASK_BUNDLE: u8 = 1;
const ASK_OPEN: u8 = 2;
const EVENT: u8 = 3;
const CHECKED: u8 = 4;
const GIVE_BUNDLE: u8 = 10;
const GIVE_ERROR: u8 = 11;
const GIVE_FILE: u8 = 12;
const GIVE_REFUSAL: u8 = 13;

/// The largest frame taken (a bundle of certificates is far smaller).
const MAX_FRAME: usize = 64 << 20;

// ---------------------------------------------------------------------------
// Frames over the socket pair

fn send_frame(sock: &UnixStream, kind: u8, payload: &[u8], fd: Option<RawFd>) -> io::Result<()> {
    let len = u32::try_from(payload.len()).map_err(|_| io::Error::other("frame too large"))?;
    let mut head = [0u8; 8];
    head[0] = kind;
    head[4..].copy_from_slice(&len.to_le_bytes());
    let mut iov = [
        libc::iovec {
            iov_base: head.as_mut_ptr().cast(),
            iov_len: head.len(),
        },
        libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        },
    ];
    // Room for one descriptor's control message, aligned for cmsghdr.
    let mut control = [0u64; 4];
    // SAFETY: an all-zero msghdr is valid (no name, no iov, no control).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = if payload.is_empty() { 1 } else { 2 };
    if let Some(fd) = fd {
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is arithmetic.
        msg.msg_controllen = unsafe { libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) } as _;
        // SAFETY: msg_control points at `control`, 32 bytes, more than
        // CMSG_SPACE(4); CMSG_FIRSTHDR/CMSG_DATA stay inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), fd);
        }
    }
    let sent = loop {
        // SAFETY: `msg` points at live buffers (`head`, `payload`,
        // `control`) for the duration of the call.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    // The descriptor went with the first byte; the rest is plain bytes.
    let mut w = sock;
    if sent < head.len() {
        w.write_all(&head[sent..])?;
        w.write_all(payload)?;
    } else {
        w.write_all(&payload[sent - head.len()..])?;
    }
    Ok(())
}

/// Fills `buf`, keeping the first descriptor that arrives on the way.
fn recv_exact(sock: &UnixStream, buf: &mut [u8], fd: &mut Option<OwnedFd>) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let mut iov = libc::iovec {
            iov_base: buf[got..].as_mut_ptr().cast(),
            iov_len: buf.len() - got,
        };
        let mut control = [0u64; 8];
        // SAFETY: an all-zero msghdr is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: `msg` points at `buf[got..]` and `control`, both live
        // and of the sizes given.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        // SAFETY: the kernel filled `control` up to msg_controllen; the
        // CMSG_* walk stays inside it, and each SCM_RIGHTS entry is a
        // descriptor now ours (closed by OwnedFd unless kept).
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(c).cast::<libc::c_int>();
                    let bytes = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    for i in 0..bytes / size_of::<libc::c_int>() {
                        let got_fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                        if fd.is_none() {
                            *fd = Some(got_fd);
                        }
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(io::Error::other("a descriptor from the broker was cut off"));
        }
        got += n as usize;
    }
    Ok(())
}

/// A frame received: its kind, payload and descriptor, if one came.
type Frame = (u8, Vec<u8>, Option<OwnedFd>);

fn recv_frame(sock: &UnixStream) -> io::Result<Frame> {
    let mut head = [0u8; 8];
    let mut fd = None;
    recv_exact(sock, &mut head, &mut fd)?;
    let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::other(format!("broker frame of {len} bytes")));
    }
    let mut payload = vec![0u8; len];
    recv_exact(sock, &mut payload, &mut fd)?;
    Ok((head[0], payload, fd))
}

// ---------------------------------------------------------------------------
// Payloads

#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(&(b.len() as u64).to_le_bytes());
        self.0.extend_from_slice(b);
        self
    }
    fn path(&mut self, p: &Path) -> &mut Self {
        self.bytes(p.as_os_str().as_bytes())
    }
    fn num(&mut self, n: u64) -> &mut Self {
        self.0.extend_from_slice(&n.to_le_bytes());
        self
    }
}

struct Dec<'a>(&'a [u8]);

impl Dec<'_> {
    fn num(&mut self) -> io::Result<u64> {
        let (n, rest) = self
            .0
            .split_first_chunk::<8>()
            .ok_or_else(|| io::Error::other("short broker message"))?;
        self.0 = rest;
        Ok(u64::from_le_bytes(*n))
    }
    fn bytes(&mut self) -> io::Result<Vec<u8>> {
        let n = usize::try_from(self.num()?).map_err(io::Error::other)?;
        if n > self.0.len() {
            return Err(io::Error::other("short broker message"));
        }
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(b.to_vec())
    }
    fn path(&mut self) -> io::Result<PathBuf> {
        Ok(PathBuf::from(OsString::from_vec(self.bytes()?)))
    }
    fn string(&mut self) -> io::Result<String> {
        String::from_utf8(self.bytes()?).map_err(io::Error::other)
    }
}

fn encode_recorded(r: &Recorded) -> Vec<u8> {
    let mut e = Enc::default();
    e.num(r.reads.len() as u64);
    for (p, b) in &r.reads {
        e.path(p).bytes(b);
    }
    e.num(r.canonical.len() as u64);
    for (p, c) in &r.canonical {
        e.path(p).path(c);
    }
    e.0
}

fn decode_recorded(b: &[u8]) -> io::Result<Recorded> {
    let mut d = Dec(b);
    let mut r = Recorded::default();
    for _ in 0..d.num()? {
        r.reads.push((d.path()?, d.bytes()?));
    }
    for _ in 0..d.num()? {
        r.canonical.push((d.path()?, d.path()?));
    }
    Ok(r)
}

fn encode_error(e: &ConfigError) -> Vec<u8> {
    let mut enc = Enc::default();
    enc.bytes(e.file.as_bytes())
        .num(e.line.map_or(u64::MAX, |l| l as u64))
        .bytes(e.key.as_bytes())
        .bytes(e.message.as_bytes());
    enc.0
}

fn decode_error(b: &[u8]) -> io::Result<ConfigError> {
    let mut d = Dec(b);
    Ok(ConfigError {
        file: d.string()?,
        line: match d.num()? {
            u64::MAX => None,
            l => Some(l as usize),
        },
        key: d.string()?,
        message: d.string()?,
    })
}

/// A broker failure, as a configuration error (what a reload reports).
fn broker_error(e: io::Error) -> ConfigError {
    ConfigError {
        file: "(privileged parent)".to_owned(),
        line: None,
        key: String::new(),
        message: format!("broker: {e}"),
    }
}

// ---------------------------------------------------------------------------
// The child's side

/// This process's broker, when it is the child of a privileged parent.
/// Requests and their answers alternate under the lock.
static CLIENT: OnceLock<Mutex<UnixStream>> = OnceLock::new();

/// Takes the broker named in the environment, if any: removes the
/// variable (nothing this process starts must see it) and keeps the
/// descriptor from being inherited further.
fn take_broker_from_env() -> io::Result<bool> {
    let Some(v) = std::env::var_os(BROKER_ENV) else {
        return Ok(false);
    };
    std::env::remove_var(BROKER_ENV);
    name_after_argv0();
    let fd: RawFd = v
        .to_str()
        .and_then(|s| s.parse().ok())
        .filter(|&fd| fd > 2)
        .ok_or_else(|| io::Error::other(format!("{BROKER_ENV}: not a descriptor")))?;
    set_cloexec(fd, true)?;
    // SAFETY: the parent passed this descriptor for us alone (checked
    // open above by fcntl); nothing else in this process owns it.
    let sock = unsafe { UnixStream::from_raw_fd(fd) };
    CLIENT
        .set(Mutex::new(sock))
        .map_err(|_| io::Error::other("broker taken twice"))?;
    Ok(true)
}

/// Started through `/proc/self/exe`, the child's name (what ps, top and
/// pgrep show) would be `exe`: it takes its argv[0]'s, as the parent has.
fn name_after_argv0() {
    let Some(a0) = std::env::args_os().next() else {
        return;
    };
    let base = Path::new(&a0)
        .file_name()
        .map_or(a0.as_bytes(), |b| b.as_bytes());
    // The kernel keeps 15 bytes and a NUL.
    let mut name = [0u8; 16];
    let n = base.len().min(15);
    name[..n].copy_from_slice(&base[..n]);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16
    // bytes, which `name` is.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
    }
}

fn set_cloexec(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor number; fails with EBADF if not open.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let flags = if on {
        flags | libc::FD_CLOEXEC
    } else {
        flags & !libc::FD_CLOEXEC
    };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One request and its answer.
fn ask(kind: u8, payload: &[u8]) -> Option<io::Result<Frame>> {
    let client = CLIENT.get()?;
    let sock = match client.lock() {
        Ok(s) => s,
        Err(p) => p.into_inner(),
    };
    Some(send_frame(&sock, kind, payload, None).and_then(|()| recv_frame(&sock)))
}

/// A fresh bundle from the privileged parent: `None` when there is none
/// (one process), else the parent's bundle or the error its load found.
pub(crate) fn bundle() -> Option<Result<Recorded, ConfigError>> {
    let answer = ask(ASK_BUNDLE, &[])?;
    Some(match answer {
        Ok((GIVE_BUNDLE, b, _)) => decode_recorded(&b).map_err(broker_error),
        Ok((GIVE_ERROR, b, _)) => Err(decode_error(&b).unwrap_or_else(broker_error)),
        Ok((k, ..)) => Err(broker_error(io::Error::other(format!("answer {k}")))),
        Err(e) => Err(broker_error(e)),
    })
}

/// Tells the parent what happened, with a status line (nothing without a
/// parent).
pub(crate) fn notify(ev: Event, status: &str) {
    if let Some(client) = CLIENT.get() {
        let sock = match client.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        let mut payload = Vec::with_capacity(1 + status.len());
        payload.push(ev as u8);
        payload.extend_from_slice(status.as_bytes());
        if let Err(e) = send_frame(&sock, EVENT, &payload, None) {
            tracing::warn!("telling the privileged parent {ev:?}: {e}");
        }
    }
}

/// Opens a log file for appending through the privileged parent (what
/// `log::open_append` calls in the server child): the parent opens it as
/// root (creating it, mode 0644, and giving it to the server's user as
/// nginx does, so that the user need not be able to write its directory or
/// the file logrotate made) and passes the descriptor back; it opens only
/// the log files its configuration names. Without a parent (one process):
/// opened here, as whoever this process is.
pub(crate) fn open_append(path: &Path) -> io::Result<File> {
    let mut e = Enc::default();
    e.path(path);
    match ask(ASK_OPEN, &e.0) {
        None => crate::log::open_here(path),
        Some(Ok((GIVE_FILE, _, Some(fd)))) => Ok(File::from(fd)),
        Some(Ok((GIVE_REFUSAL, why, _))) => {
            Err(io::Error::other(String::from_utf8_lossy(&why).into_owned()))
        }
        Some(Ok((k, ..))) => Err(io::Error::other(format!("broker answer {k}"))),
        Some(Err(e)) => Err(e),
    }
}

/// What the server child inherits: the config file its parent loaded, and
/// every worker's listeners, each TCP one with, for TLS, its configured
/// address.
pub(crate) struct Inherited {
    pub config: Option<PathBuf>,
    pub listeners: Vec<crate::worker::Sockets>,
}

/// In the server child: takes its broker and what it inherited. `None` in
/// a process started any other way.
pub(crate) fn server_child_from_env() -> io::Result<Option<Inherited>> {
    let Some(spec) = std::env::var_os(LISTENERS_ENV) else {
        return Ok(None);
    };
    std::env::remove_var(LISTENERS_ENV);
    let config = std::env::var_os(CONFIG_ENV).map(PathBuf::from);
    std::env::remove_var(CONFIG_ENV);
    if !take_broker_from_env()? {
        return Err(io::Error::other(format!(
            "{LISTENERS_ENV} without {BROKER_ENV}"
        )));
    }
    let spec = spec
        .into_string()
        .map_err(|_| io::Error::other(format!("{LISTENERS_ENV}: not UTF-8")))?;
    let mut out: Vec<crate::worker::Sockets> = Vec::new();
    for entry in spec.split_whitespace() {
        let bad = || io::Error::other(format!("{LISTENERS_ENV}: bad entry `{entry}`"));
        let mut f = entry.splitn(4, ',');
        let fd: RawFd = f.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let worker: usize = f.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let tls = match f.next().ok_or_else(bad)? {
            "-" => None,
            a => Some(a.parse().map_err(|_| bad())?),
        };
        let (proxy_protocol, udp) = match f.next().ok_or_else(bad)? {
            "-" => (false, false),
            "proxy" => (true, false),
            // HTTP/3's UDP side of the TLS address named before.
            "udp" => (false, true),
            _ => return Err(bad()),
        };
        set_cloexec(fd, true)?;
        // SAFETY: the parent made this descriptor a listening socket for
        // this process and named it once; nothing else here owns it.
        let socket = socket2::Socket::from(unsafe { OwnedFd::from_raw_fd(fd) });
        if out.len() <= worker {
            out.resize_with(worker + 1, Default::default);
        }
        if udp {
            let tls = tls.ok_or_else(bad)?;
            out[worker].udp.push(crate::worker::UdpListener {
                socket: socket.into(),
                tls,
            });
        } else if socket.domain()? == socket2::Domain::UNIX {
            out[worker].unix.push(crate::worker::UnixListener {
                socket: OwnedFd::from(socket).into(),
                proxy_protocol,
            });
        } else {
            out[worker].tcp.push(crate::worker::Listener {
                socket: socket.into(),
                tls,
                proxy_protocol,
            });
        }
    }
    Ok(Some(Inherited {
        config,
        listeners: out,
    }))
}

// ---------------------------------------------------------------------------
// The parent's side

/// The log files a configuration names, the only files the parent opens
/// for its child: the error log (`[log] error`), the server's access log
/// and every route's own `access_log`.
pub(crate) fn log_paths(rt: &Runtime) -> Vec<PathBuf> {
    use crate::log::access::Dest;
    let routes = rt.sites.iter().flat_map(|s| s.routes.iter());
    let mut files: Vec<PathBuf> = std::iter::once(&rt.access_log)
        .chain(routes.filter_map(|r| r.edge.access_log.as_ref()))
        .filter_map(|l| match &l.dest {
            Dest::File(p) => Some(p.clone()),
            _ => None,
        })
        .chain(rt.error_log.iter().cloned())
        .collect();
    files.sort();
    files.dedup();
    files
}

/// Opens `path` for appending as root for `acct`, refusing what could turn
/// the request into a way to write elsewhere: the last component must not
/// be a symlink (the user may be able to write the directory), and the
/// file must be a regular one with no other name.
fn open_for(path: &Path, acct: &Account) -> io::Result<File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() || meta.nlink() > 1 {
        return Err(io::Error::other(format!(
            "{}: not a regular file with one name",
            path.display()
        )));
    }
    // The user becomes its owner, the group stays (nginx's
    // ngx_reopen_files: logrotate's `create 0640 root adm` leaves a file
    // that `adm` still reads).
    if meta.uid() != acct.uid {
        std::os::unix::fs::fchown(&f, Some(acct.uid), None)?;
    }
    Ok(f)
}

/// The parent writes its own lines (the child's start and end, an
/// upgrade, a broker failure) to the error log too, as nginx's master
/// does: a file it opens itself, as root, and reopens on SIGUSR1. A
/// reload naming another one moves it there; one it cannot open leaves it
/// where it was (the server child reports the reload failed).
fn parent_error_log(rt: &Runtime) {
    if let Err(e) = crate::log::set_error_log(rt.error_log.as_deref(), rt.error_json) {
        tracing::error!(
            "error log {}: {e}",
            rt.error_log.as_deref().unwrap_or(Path::new("-")).display()
        );
    }
}

fn load_recording(source: &Source) -> Result<(Runtime, Recorded), ConfigError> {
    let files = Files::recording();
    let rt = source.load_with(&files, true)?;
    Ok((rt, files.into_recorded()))
}

/// Serves the child's requests until it closes its end; events go to the
/// parent's loop.
fn serve_broker(
    sock: UnixStream,
    source: Source,
    acct: Account,
    mut first: Option<Recorded>,
    mut logs: Vec<PathBuf>,
    events: tokio::sync::mpsc::UnboundedSender<(Event, String)>,
) {
    loop {
        let (kind, payload, _) = match recv_frame(&sock) {
            Ok(f) => f,
            Err(e) => {
                if e.kind() != io::ErrorKind::UnexpectedEof {
                    tracing::error!("broker: {e}");
                }
                return;
            }
        };
        let sent = match kind {
            ASK_BUNDLE => {
                let answer = match first.take() {
                    Some(r) => Ok(r),
                    None => load_recording(&source).map(|(rt, r)| {
                        logs = log_paths(&rt);
                        parent_error_log(&rt);
                        r
                    }),
                };
                match answer {
                    Ok(r) => send_frame(&sock, GIVE_BUNDLE, &encode_recorded(&r), None),
                    Err(e) => send_frame(&sock, GIVE_ERROR, &encode_error(&e), None),
                }
            }
            ASK_OPEN => {
                let opened = Dec(&payload).path().and_then(|p| {
                    if logs.contains(&p) {
                        open_for(&p, &acct)
                    } else {
                        Err(io::Error::other(format!(
                            "{}: not a log file of the configuration",
                            p.display()
                        )))
                    }
                });
                match opened {
                    Ok(f) => send_frame(&sock, GIVE_FILE, &[], Some(f.as_raw_fd())),
                    Err(e) => send_frame(&sock, GIVE_REFUSAL, e.to_string().as_bytes(), None),
                }
            }
            EVENT => {
                if let Some((ev, status)) = payload.split_first() {
                    if let Some(ev) = Event::from_byte(*ev) {
                        let _ = events.send((ev, String::from_utf8_lossy(status).into_owned()));
                    }
                }
                Ok(())
            }
            k => {
                tracing::error!("broker: unknown request {k}");
                return;
            }
        };
        if let Err(e) = sent {
            tracing::error!("broker: answering the server process: {e}");
            return;
        }
    }
}

/// The command that starts this binary again as a child, with the same
/// arguments, becoming `acct` before it runs: `keep` are descriptors it
/// inherits (everything else is close-on-exec).
fn child_command(acct: &Account, keep: Vec<RawFd>) -> std::process::Command {
    let mut args = std::env::args_os();
    let mut cmd = std::process::Command::new("/proc/self/exe");
    if let Some(a0) = args.next() {
        cmd.arg0(a0);
    }
    cmd.args(args);
    // What a supervisor hands to the main process is the parent's: the
    // readiness socket and inherited listeners (sd_notify(3),
    // sd_listen_fds(3)) must not be taken by the child as its own.
    for v in [
        "NOTIFY_SOCKET",
        "LISTEN_FDS",
        "LISTEN_PID",
        "LISTEN_FDNAMES",
    ] {
        cmd.env_remove(v);
    }
    let acct = acct.clone();
    // SAFETY: parent pid read before the fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: between fork and exec the closure makes only syscalls
    // (fcntl, setgroups/setgid/setuid, prctl, getppid) on memory allocated
    // before the fork; no locks, no allocation.
    unsafe {
        cmd.pre_exec(move || {
            for &fd in &keep {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            acct.become_it()?;
            // Set after the change of credentials, which clears it: the
            // child goes when the parent does (even by SIGKILL), and a
            // parent already gone is caught by getppid.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                // The parent is gone (no allocation here: ESRCH says it).
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    cmd
}

/// The privileged parent's state: the one place where what the server
/// does meets what the parent does about it.
struct Parent {
    child: i32,
    /// The server reported [`Event::Ready`].
    ready: bool,
    /// A SIGHUP came before the server was ready: sent once it is.
    hup_pending: bool,
    /// A stop was asked for (a signal to the parent, or the child said so).
    stopping: bool,
    /// The service's side: systemd's notifications, the upgrade, and the
    /// parent's copies of the listening sockets (the same sockets as the
    /// child's, not sockets of their own in the SO_REUSEPORT group, so no
    /// connection waits at one nobody accepts on), kept to hand to a new
    /// binary and closed when a stop begins, so that new connections are
    /// refused as in one process.
    life: Lifecycle,
}

impl Parent {
    fn signal_child(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child, not yet reaped (its exit is
        // only collected by the loop that owns `self`).
        unsafe {
            libc::kill(self.child, sig);
        }
    }

    /// Everything the server reports lands here.
    fn on_event(&mut self, ev: Event, status: &str) {
        tracing::debug!("server process {}: {ev:?} {status}", self.child);
        match ev {
            Event::Ready => {
                self.ready = true;
                if std::mem::take(&mut self.hup_pending) {
                    self.signal_child(libc::SIGHUP);
                }
            }
            Event::Stopping => self.begin_stop(),
            _ => {}
        }
        self.life.event(ev, status);
    }

    fn begin_stop(&mut self) {
        self.stopping = true;
        self.life.stop();
    }

    /// A signal to the parent, passed on.
    fn forward(&mut self, sig: libc::c_int) {
        match sig {
            libc::SIGHUP if !self.ready => self.hup_pending = true,
            libc::SIGHUP | libc::SIGUSR1 => {
                if self.ready {
                    self.signal_child(sig)
                }
            }
            _ => {
                self.begin_stop();
                // Before its handlers are in, SIGQUIT's default action
                // would dump core; SIGTERM ends it plainly. Its Ready may
                // still be on its way over the broker while the handler
                // is in (a SIGQUIT sent on the ready line): the kernel's
                // record of caught signals says which.
                let sig = if self.ready || catches(self.child, sig) {
                    sig
                } else {
                    libc::SIGTERM
                };
                self.signal_child(sig);
            }
        }
    }
}

/// Whether process `pid` has a handler for `sig` (proc(5): `SigCgt` in
/// /proc/PID/status, a hexadecimal mask with bit `sig - 1`).
fn catches(pid: i32, sig: libc::c_int) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|mask| (1..=64).contains(&sig) && mask & (1u64 << (sig - 1)) != 0)
}

/// Runs the privileged parent (see the module doc) until its server
/// process exits. `rt` and `first` are the configuration it loaded as
/// root, and what that load read; `life` and `inherited` what systemd or
/// a previous binary passed.
pub(crate) fn run_parent(
    source: Source,
    rt: Runtime,
    first: Recorded,
    acct: Account,
    mut life: Lifecycle,
    inherited: InheritedSockets,
) -> Result<(), StartError> {
    let (signals, mut sig) = crate::server::signals()?;
    // systemd's sockets or a predecessor's, else bound here; the child
    // gets every worker's, the parent keeps one of each (`life`).
    let per_worker = life.listeners(&crate::server::wanted(&rt), rt.workers, inherited)?;
    let mut spec = Vec::new();
    let mut keep = Vec::new();
    let mut passed: Vec<OwnedFd> = Vec::new();
    let flag = |p: bool| if p { "proxy" } else { "-" };
    for (w, ls) in per_worker.into_iter().enumerate() {
        for l in ls.tcp {
            let fd = l.socket.as_raw_fd();
            spec.push(format!(
                "{fd},{w},{},{}",
                l.tls.map_or("-".to_owned(), |a| a.to_string()),
                flag(l.proxy_protocol)
            ));
            keep.push(fd);
            passed.push(l.socket.into());
        }
        for l in ls.udp {
            let fd = l.socket.as_raw_fd();
            spec.push(format!("{fd},{w},{},udp", l.tls));
            keep.push(fd);
            passed.push(l.socket.into());
        }
        for l in ls.unix {
            let fd = l.socket.as_raw_fd();
            spec.push(format!("{fd},{w},-,{}", flag(l.proxy_protocol)));
            keep.push(fd);
            passed.push(l.socket.into());
        }
    }
    let (ours, theirs) = UnixStream::pair().map_err(StartError::Io)?;
    keep.push(theirs.as_raw_fd());
    let mut cmd = child_command(&acct, keep);
    cmd.env(BROKER_ENV, theirs.as_raw_fd().to_string())
        .env(LISTENERS_ENV, spec.join(" "));
    match &source.config {
        Some(c) => cmd.env(CONFIG_ENV, c),
        None => cmd.env_remove(CONFIG_ENV),
    };
    let logs = log_paths(&rt);
    parent_error_log(&rt);
    drop(rt);
    let mut child = {
        // The child's exit is watched through this runtime's SIGCHLD.
        let _enter = signals.enter();
        tokio::process::Command::from(cmd)
            .spawn()
            .map_err(|e| StartError::Privileges(format!("starting the server process: {e}")))?
    };
    drop(theirs);
    // The child has them; the parent's copies are in `life`.
    drop(passed);
    // Never 0: kill(0, sig) would signal the whole process group.
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .filter(|&p| p > 0)
        .ok_or_else(|| StartError::Privileges("the server process has no pid".into()))?;
    tracing::info!(
        "privileged parent {} (root) started the server process {pid} as {} (uid {}, gid {})",
        std::process::id(),
        acct.name,
        acct.uid,
        acct.gid
    );
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let broker_acct = acct.clone();
    std::thread::Builder::new()
        .name("stoa-broker".into())
        .spawn(move || serve_broker(ours, source, broker_acct, Some(first), logs, tx))
        .map_err(StartError::Io)?;
    let mut parent = Parent {
        child: pid,
        ready: false,
        hup_pending: false,
        stopping: false,
        life,
    };
    // A local set: an upgrade that fails reaps its process in a task.
    let status = tokio::task::LocalSet::new().block_on(&signals, async {
        loop {
            tokio::select! {
                st = child.wait() => break st,
                Some((ev, status)) = events.recv() => parent.on_event(ev, &status),
                _ = sig.usr2.recv() => parent.life.upgrade(),
                // The new binary's parent serves with its own child: this
                // one's finishes its responses (as on SIGQUIT), then both go.
                _ = parent.life.upgraded() => parent.forward(libc::SIGQUIT),
                _ = sig.hup.recv() => parent.forward(libc::SIGHUP),
                // The parent's error log, then the child's files.
                _ = sig.usr1.recv() => {
                    crate::log::reopen();
                    parent.forward(libc::SIGUSR1)
                }
                _ = sig.term.recv() => parent.forward(libc::SIGTERM),
                _ = sig.int.recv() => parent.forward(libc::SIGINT),
                _ = sig.quit.recv() => parent.forward(libc::SIGQUIT),
            }
        }
    });
    // Nothing accepts on them any more: the Unix socket files the parent
    // made (as root, in a directory the child may not write) go.
    parent.life.remove_socket_files();
    let status = status.map_err(StartError::Io)?;
    match (status.code(), status.signal()) {
        (Some(0), _) => Ok(()),
        // The stop we asked for, before the server could catch it.
        (_, Some(sig)) if parent.stopping && (sig == libc::SIGTERM || sig == libc::SIGINT) => {
            Ok(())
        }
        _ => {
            // Said once, by whoever reports the start error (the binary:
            // "stoa: ..."), and exits non-zero.
            Err(StartError::Privileges(format!(
                "the server process {pid} ended unexpectedly ({status})"
            )))
        }
    }
}

// ---------------------------------------------------------------------------
// `stoa check` as the user

/// Checks a configuration file as `stoa serve` would load it: as root (the
/// config, certificates and keys), then, when started as root with a
/// `user` to become, again as that user from root's bundle, so that a path
/// only root can read is an error naming it.
pub fn check(file: &Path, overrides: &Overrides) -> Result<Runtime, ConfigError> {
    if take_broker_from_env().map_err(broker_error)? {
        // The checking child: load from the parent's bundle, say how it
        // went, and end here.
        let result = match bundle() {
            Some(Ok(r)) => config::load_with(file, overrides, &Files::from_recorded(r)),
            Some(Err(e)) => Err(e),
            None => Err(broker_error(io::Error::other("no broker"))),
        };
        let payload = match &result {
            Ok(_) => Vec::new(),
            Err(e) => encode_error(e),
        };
        let sent = CLIENT.get().map(|c| {
            let sock = match c.lock() {
                Ok(s) => s,
                Err(p) => p.into_inner(),
            };
            send_frame(&sock, CHECKED, &payload, None)
        });
        std::process::exit(if matches!(sent, Some(Ok(()))) { 0 } else { 1 });
    }
    let files = Files::recording();
    let rt = config::load_with(file, overrides, &files)?;
    let as_user = |message: String| ConfigError {
        file: file.display().to_string(),
        line: None,
        key: "user".to_owned(),
        message,
    };
    let Some(acct) = crate::privileges::account_to_become(rt.user.as_deref()).map_err(as_user)?
    else {
        return Ok(rt);
    };
    let recorded = files.into_recorded();
    let (ours, theirs) = UnixStream::pair().map_err(broker_error)?;
    let mut cmd = child_command(&acct, vec![theirs.as_raw_fd()]);
    cmd.env(BROKER_ENV, theirs.as_raw_fd().to_string());
    let mut child = cmd
        .spawn()
        .map_err(|e| as_user(format!("cannot check as `{}`: {e}", acct.name)))?;
    drop(theirs);
    let mut verdict = None;
    while let Ok((kind, payload, _)) = recv_frame(&ours) {
        match kind {
            ASK_BUNDLE => {
                if send_frame(&ours, GIVE_BUNDLE, &encode_recorded(&recorded), None).is_err() {
                    break;
                }
            }
            CHECKED => {
                verdict = Some(if payload.is_empty() {
                    Ok(())
                } else {
                    decode_error(&payload).map_err(broker_error).and_then(Err)
                });
                break;
            }
            _ => break,
        }
    }
    drop(ours);
    let status = child.wait();
    match verdict {
        Some(Ok(())) => Ok(rt),
        Some(Err(mut e)) => {
            e.message = format!(
                "{} (checked as `{}`, the user Stoa serves as)",
                e.message, acct.name
            );
            Err(e)
        }
        None => Err(as_user(format!(
            "the check as `{}` ended without a verdict ({status:?})",
            acct.name
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_and_an_error_survive_the_trip_through_the_socket_pair() {
        let (a, b) = UnixStream::pair().unwrap();
        let r = Recorded {
            reads: vec![
                (
                    PathBuf::from("/etc/stoa/stoa.toml"),
                    b"listen = []\n".to_vec(),
                ),
                (PathBuf::from("/k.pem"), vec![0, 1, 2, 255]),
            ],
            canonical: vec![(PathBuf::from("."), PathBuf::from("/etc/stoa"))],
        };
        send_frame(&a, GIVE_BUNDLE, &encode_recorded(&r), None).unwrap();
        let (k, p, fd) = recv_frame(&b).unwrap();
        assert_eq!((k, fd.is_none()), (GIVE_BUNDLE, true));
        assert_eq!(decode_recorded(&p).unwrap(), r);
        let e = ConfigError {
            file: "stoa.toml".into(),
            line: Some(3),
            key: "tls".into(),
            message: "key.pem: cannot read".into(),
        };
        send_frame(&a, GIVE_ERROR, &encode_error(&e), None).unwrap();
        let (_, p, _) = recv_frame(&b).unwrap();
        assert_eq!(decode_error(&p).unwrap(), e);
        assert!(
            decode_recorded(&p[..3]).is_err(),
            "a short message is an error"
        );
    }

    /// The parent opens log files as root for a less trusted process: a
    /// symlink or a second name could point it at any file (the classic
    /// log-rotation symlink attack), so both are refused.
    #[test]
    fn a_log_file_is_not_opened_through_a_symlink_or_a_second_hard_link() {
        let d = std::env::temp_dir().join(format!("stoa-open-for-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        // SAFETY: geteuid/getegid have no preconditions.
        let me = Account {
            name: "me".into(),
            uid: unsafe { libc::geteuid() },
            gid: unsafe { libc::getegid() },
            groups: Vec::new(),
        };
        let log = d.join("access.log");
        let mut f = open_for(&log, &me).expect("created");
        f.write_all(b"line\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&log).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o622, 0o600, "writable by its owner only: {mode:o}");
        let target = d.join("precious");
        std::fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, d.join("link.log")).unwrap();
        assert!(open_for(&d.join("link.log"), &me).is_err());
        std::fs::hard_link(&target, d.join("hard.log")).unwrap();
        assert!(open_for(&d.join("hard.log"), &me).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// proc(5) SigCgt: `sleep` leaves SIGQUIT to its default action; this
    /// process catches it once a handler is installed.
    #[test]
    fn sigcgt_says_whether_a_process_has_a_handler_for_a_signal() {
        let mut sleeper = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .expect("spawn sleep");
        let pid = i32::try_from(sleeper.id()).expect("pid");
        let caught = catches(pid, libc::SIGQUIT);
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert!(!caught);
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        assert!(!catches(me, 0));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let _enter = rt.enter();
        let _h =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::quit()).expect("handler");
        assert!(catches(me, libc::SIGQUIT));
    }

    #[test]
    fn a_descriptor_passed_with_scm_rights_is_the_same_open_file() {
        let (a, b) = UnixStream::pair().unwrap();
        let path = std::env::temp_dir().join(format!("stoa-broker-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        send_frame(&a, GIVE_FILE, &[], Some(f.as_raw_fd())).unwrap();
        drop(f);
        let (k, _, fd) = recv_frame(&b).unwrap();
        assert_eq!(k, GIVE_FILE);
        let mut got = File::from(fd.expect("a descriptor"));
        got.write_all(b"through the broker\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "through the broker\n"
        );
        std::fs::remove_file(&path).unwrap();
    }
}
