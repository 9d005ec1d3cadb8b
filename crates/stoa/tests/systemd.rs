//! Running under systemd: the readiness protocol of sd_notify(3) (a
//! datagram socket in `NOTIFY_SOCKET` stands in for the service manager)
//! and socket activation per sd_listen_fds(3), with systemd's own
//! `systemd-socket-activate` (Debian package `systemd`) passing the socket.
//!
//! Each runs both ways Stoa runs when started as root (as systemd starts
//! it): one process (`user = "root"` written out), and a root parent with a
//! `www-data` server child, where the parent is the unit's main pid and
//! the only one that speaks to systemd (`NotifyAccess=main`).

mod common;
use common::*;
use std::ffi::OsStr;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

/// An address for `systemd-socket-activate -l` that nothing else on the
/// machine binds meanwhile: a port found free by binding and closing can
/// be taken in between as the local port of any outgoing connection from
/// 127.0.0.1 (CI, under load, saw the activator fail to listen), so the
/// port is found on a loopback address of this test alone (all of
/// 127.0.0.0/8 is local, and connections to it leave from 127.0.0.1).
fn activation_addr() -> String {
    static NEXT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(1);
    let pid = std::process::id();
    let ip = std::net::Ipv4Addr::new(
        127,
        100 + (pid % 100) as u8,
        (pid / 100 % 250) as u8 + 1,
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    );
    let port = std::net::TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    format!("{ip}:{port}")
}

/// A datagram socket standing in for systemd's notification socket.
struct Manager {
    sock: UnixDatagram,
    path: PathBuf,
}

impl Manager {
    fn new(d: &TempDir) -> Manager {
        let path = d.join("notify.sock");
        let sock = UnixDatagram::bind(&path).expect("bind the notification socket");
        // The sender's pid comes with each datagram, as systemd reads it to
        // apply NotifyAccess= (unix(7), SO_PASSCRED).
        let on: libc::c_int = 1;
        // SAFETY: setsockopt reads an int we own, on a socket we own.
        let r = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&sock),
                libc::SOL_SOCKET,
                libc::SO_PASSCRED,
                (&on as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "SO_PASSCRED: {}", std::io::Error::last_os_error());
        sock.set_read_timeout(Some(WAIT)).expect("read timeout");
        Manager { sock, path }
    }

    /// One datagram and the pid that sent it, within `WAIT`.
    fn recv(&self) -> (String, i32) {
        let mut buf = [0u8; 4096];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut control = [0u64; 8];
        // SAFETY: an all-zero msghdr is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: `msg` points at `buf` and `control`, live and of the
        // sizes given.
        let n = unsafe { libc::recvmsg(std::os::fd::AsRawFd::as_raw_fd(&self.sock), &mut msg, 0) };
        assert!(
            n >= 0,
            "no notification within {WAIT:?}: {}",
            std::io::Error::last_os_error()
        );
        let mut pid = 0;
        // SAFETY: the kernel filled `control` up to msg_controllen; the
        // CMSG_* walk stays inside it.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_CREDENTIALS {
                    pid = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::ucred>()).pid;
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        (
            String::from_utf8_lossy(&buf[..n as usize]).into_owned(),
            pid,
        )
    }

    /// The next notification that changes the state (`STATUS=` updates
    /// alone are skipped), each checked to come from `s`, the process the
    /// service manager started: with `NotifyAccess=main` systemd ignores
    /// any other.
    fn next(&self, s: &Server) -> String {
        loop {
            let (msg, pid) = self.recv();
            assert_eq!(
                pid,
                s.pid(),
                "{msg:?} came from pid {pid}, not from the main pid {}",
                s.pid()
            );
            if !msg.lines().all(|l| l.starts_with("STATUS=")) {
                return msg;
            }
        }
    }
}

fn value<'a>(msg: &'a str, key: &str) -> Option<&'a str> {
    msg.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// Two document roots and a config serving `root`, as `user`.
fn site(d: &TempDir, root: &str, user: &str) -> PathBuf {
    if user != "root" {
        require_root();
    }
    d.write("a/page.txt", "from A\n");
    d.write("b/page.txt", "from B\n");
    let prelude = CONFIG_PRELUDE.replace("user = \"root\"", &format!("user = \"{user}\""));
    d.write(
        "stoa.toml",
        format!("{prelude}[[site]]\nroot = \"{root}\"\n"),
    )
}

fn serve_notified(cfg: &std::path::Path, m: &Manager) -> Server {
    Server::try_spawn_program(
        OsStr::new(stoa_bin()),
        [OsStr::new("serve"), OsStr::new("--config"), cfg.as_os_str()],
        &[("NOTIFY_SOCKET", m.path.as_os_str())],
    )
    .unwrap_or_else(|e| panic!("stoa did not start: {e}"))
}

fn ready_once_the_listener_answers(user: &str) {
    let d = TempDir::new("sd-ready");
    let m = Manager::new(&d);
    let cfg = site(&d, "a", user);
    let s = serve_notified(&cfg, &m);
    // The first notification is READY=1, and the listener it announces
    // answers at once.
    let first = m.next(&s);
    assert_eq!(value(&first, "READY"), Some("1"), "{first:?}");
    let r = s.get("/page.txt");
    assert_eq!(r.body, b"from A\n");
    let status = value(&first, "STATUS").unwrap_or_default();
    assert!(
        status.contains(&format!("http://{}", s.addr)) && status.contains("connection"),
        "STATUS should name the address and the connections: {status:?}"
    );
}

#[test]
fn ready_1_is_sent_only_once_the_listener_answers_per_sd_notify_3() {
    ready_once_the_listener_answers(ONE_PROCESS);
}

#[test]
fn under_a_root_parent_ready_1_comes_from_the_parent_once_its_server_child_answers_per_sd_notify_3()
{
    ready_once_the_listener_answers(TWO_PROCESSES);
}

fn reload_bracketed(user: &str) {
    let d = TempDir::new("sd-reload");
    let m = Manager::new(&d);
    let cfg = site(&d, "a", user);
    let s = serve_notified(&cfg, &m);
    assert_eq!(value(&m.next(&s), "READY"), Some("1"));

    site(&d, "b", user);
    let before = monotonic_usec();
    s.signal(libc::SIGHUP);
    let reloading = m.next(&s);
    let after = monotonic_usec();
    assert_eq!(value(&reloading, "RELOADING"), Some("1"), "{reloading:?}");
    let usec: u64 = value(&reloading, "MONOTONIC_USEC")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no MONOTONIC_USEC in {reloading:?}"));
    assert!(
        before <= usec && usec <= after,
        "MONOTONIC_USEC={usec} is not CLOCK_MONOTONIC at the reload ({before}..{after})"
    );
    let ready = m.next(&s);
    assert_eq!(value(&ready, "READY"), Some("1"), "{ready:?}");
    // READY=1 comes once the new configuration serves.
    assert_eq!(s.get("/page.txt").body, b"from B\n");

    // A reload that fails still ends with READY=1 (the old configuration
    // serves), and says so.
    std::fs::write(&cfg, "this is not toml [[[").expect("write");
    s.signal(libc::SIGHUP);
    assert_eq!(value(&m.next(&s), "RELOADING"), Some("1"));
    let ready = m.next(&s);
    assert_eq!(value(&ready, "READY"), Some("1"), "{ready:?}");
    let status = value(&ready, "STATUS").unwrap_or_default();
    assert!(
        status.contains("reload failed") && status.contains("previous configuration"),
        "{status:?}"
    );
    assert_eq!(s.get("/page.txt").body, b"from B\n");
}

#[test]
fn sighup_is_bracketed_by_reloading_1_with_monotonic_usec_and_ready_1_per_sd_notify_3() {
    reload_bracketed(ONE_PROCESS);
}

#[test]
fn under_a_root_parent_a_sighup_is_bracketed_by_reloading_1_and_ready_1_from_the_parent_per_sd_notify_3(
) {
    reload_bracketed(TWO_PROCESSES);
}

fn stopping_before_exit(user: &str) {
    let d = TempDir::new("sd-stop");
    let m = Manager::new(&d);
    let cfg = site(&d, "a", user);
    let mut s = serve_notified(&cfg, &m);
    assert_eq!(value(&m.next(&s), "READY"), Some("1"));
    s.signal(libc::SIGQUIT);
    let stopping = m.next(&s);
    assert_eq!(value(&stopping, "STOPPING"), Some("1"), "{stopping:?}");
    let st = s.wait_exit(WAIT).expect("exit after SIGQUIT");
    assert!(st.success(), "{st}");
}

#[test]
fn sigquit_sends_stopping_1_before_the_process_exits_per_sd_notify_3() {
    stopping_before_exit(ONE_PROCESS);
}

#[test]
fn under_a_root_parent_sigquit_sends_stopping_1_from_the_parent_before_it_exits_per_sd_notify_3() {
    stopping_before_exit(TWO_PROCESSES);
}

fn socket_activated(user: &str) {
    require("systemd-socket-activate", "systemd");
    if user != "root" {
        require_root();
    }
    let d = TempDir::new("sd-activate");
    // The configured address is the one systemd listens on.
    let addr = activation_addr();
    d.write("www/page.txt", "activated\n");
    let cfg = d.write(
        "stoa.toml",
        format!(
            "listen = [\"{addr}\"]\nworkers = 2\nuser = \"{user}\"\n\n[log]\naccess = \"off\"\n\n\
             [[site]]\nroot = \"www\"\n"
        ),
    );
    // systemd-socket-activate listens, and on the first connection execs
    // Stoa with LISTEN_PID/LISTEN_FDS=1 and the socket as descriptor 3.
    let starter = {
        let cfg = cfg.clone();
        let addr = addr.clone();
        std::thread::spawn(move || {
            Server::try_spawn_program(
                OsStr::new("systemd-socket-activate"),
                [
                    OsStr::new("-l"),
                    OsStr::new(&addr),
                    OsStr::new(stoa_bin()),
                    OsStr::new("serve"),
                    OsStr::new("--config"),
                    cfg.as_os_str(),
                ],
                &[],
            )
        })
    };
    let until = Instant::now() + WAIT;
    let mut c = loop {
        match Conn::try_connect(addr.parse().expect("address")) {
            Ok(c) => break c,
            Err(e) => {
                assert!(
                    Instant::now() < until,
                    "systemd-socket-activate never listened: {e}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    // This connection was accepted by nobody yet: it waits in the
    // inherited socket's queue until Stoa, started by it, accepts.
    let r = c.request(&get("/page.txt"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, b"activated\n");
    let s = starter
        .join()
        .expect("starter thread")
        .unwrap_or_else(|e| panic!("stoa did not start: {e}"));
    assert_eq!(s.addr.to_string(), addr);
    assert!(
        s.wait_stderr(0, "from systemd", Duration::from_secs(10)),
        "Stoa should say it took the socket from systemd:\n{}",
        s.stderr()
    );
    // Both workers accept on the one socket.
    for _ in 0..20 {
        assert_eq!(s.get("/page.txt").status, 200);
    }
    if user != "root" {
        // The root parent took systemd's socket and passed it on: the
        // process that answers is its child, running as the user.
        assert!(
            s.wait_stderr(0, &format!("running as {user}"), Duration::from_secs(10))
                && s.wait_stderr(0, "under the privileged parent", Duration::from_secs(10)),
            "{}",
            s.stderr()
        );
        assert_eq!(live_children(s.pid()).len(), 1, "{}", s.stderr());
    }
}

#[test]
fn systemd_socket_activate_starts_stoa_on_the_inherited_socket_per_sd_listen_fds_3() {
    socket_activated(ONE_PROCESS);
}

#[test]
fn systemd_socket_activate_starts_a_root_parent_that_passes_the_socket_to_its_www_data_child_per_sd_listen_fds_3(
) {
    socket_activated(TWO_PROCESSES);
}

#[test]
fn a_socket_from_systemd_that_no_listen_address_wants_refuses_the_start() {
    require("systemd-socket-activate", "systemd");
    let d = TempDir::new("sd-unmatched");
    let addr = activation_addr();
    d.write("www/page.txt", "x\n");
    // Stoa is configured for another address than the one systemd holds.
    let cfg = d.config("stoa.toml", "[[site]]\nroot = \"www\"\n");
    let cfg = {
        let text = std::fs::read_to_string(&cfg).expect("read");
        d.write("stoa.toml", text.replace("127.0.0.1:0", "127.0.0.2:0"))
    };
    let mut child = std::process::Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&addr)
        .arg(stoa_bin())
        .args([OsStr::new("serve"), OsStr::new("--config"), cfg.as_os_str()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn systemd-socket-activate");
    let until = Instant::now() + WAIT;
    while Conn::try_connect(addr.parse().expect("address")).is_err() {
        if let Ok(Some(st)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("systemd-socket-activate ended ({st}) before it listened on {addr}: {err}");
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("systemd-socket-activate never listened on {addr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break st;
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("stoa kept running on a socket it was not configured for");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("is not a configured"), "{err}");
}

/// sd_listen_fds(3) with `ListenStream=/path` (here
/// `systemd-socket-activate -l /path`): the passed Unix-domain socket
/// serves the `unix:` listener of its path, with its `[proxy_protocol]`
/// setting, whichever process serves it (one, or a root parent's www-data
/// child); the file is systemd's, so Stoa leaves it at stop.
fn unix_socket_activated(user: &str) {
    require("systemd-socket-activate", "systemd");
    if user != "root" {
        require_root();
    }
    let d = TempDir::new("sd-activate-unix");
    let sock = d.join("http.sock");
    d.write("www/page.txt", "activated\n");
    let cfg = d.write(
        "stoa.toml",
        format!(
            "listen = [\"127.0.0.1:0\", \"unix:{0}\"]\nworkers = 2\nuser = \"{user}\"\n\n\
             [log]\naccess = \"off\"\n\n[proxy_protocol]\nlisten = [\"unix:{0}\"]\n\n\
             [[site]]\nroot = \"www\"\n",
            sock.display()
        ),
    );
    let starter = {
        let cfg = cfg.clone();
        let sock = sock.clone();
        std::thread::spawn(move || {
            Server::try_spawn_program(
                OsStr::new("systemd-socket-activate"),
                [
                    OsStr::new("-l"),
                    sock.as_os_str(),
                    OsStr::new(stoa_bin()),
                    OsStr::new("serve"),
                    OsStr::new("--config"),
                    cfg.as_os_str(),
                ],
                &[],
            )
        })
    };
    let ask = |bytes: &[u8]| -> Option<String> {
        use std::io::{Read, Write};
        let mut c = std::os::unix::net::UnixStream::connect(&sock).ok()?;
        c.set_read_timeout(Some(WAIT)).ok()?;
        c.write_all(bytes).ok()?;
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        Some(String::from_utf8_lossy(&out).into_owned())
    };
    let with_header =
        b"PROXY TCP4 203.0.113.9 127.0.0.1 5555 80\r\nGET /page.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let until = Instant::now() + WAIT;
    // The first connection waits in systemd's socket until Stoa accepts.
    let first = loop {
        if let Some(r) = ask(with_header) {
            break r;
        }
        assert!(
            Instant::now() < until,
            "systemd-socket-activate never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(first.starts_with("HTTP/1.1 200 "), "{first}");
    assert!(first.ends_with("activated\n"), "{first}");
    let mut s = starter
        .join()
        .expect("starter thread")
        .unwrap_or_else(|e| panic!("stoa did not start: {e}"));
    assert!(
        s.wait_stderr(0, "from systemd", Duration::from_secs(10)),
        "Stoa should say it took the socket from systemd:\n{}",
        s.stderr()
    );
    // Without the header: closed unanswered (the flag came with it).
    assert_eq!(
        ask(b"GET /page.txt HTTP/1.1\r\nHost: t\r\n\r\n").as_deref(),
        Some("")
    );
    s.signal(libc::SIGTERM);
    let st = s.wait_exit(WAIT).expect("exit");
    assert!(st.success(), "{st}\n{}", s.stderr());
    assert!(sock.exists(), "systemd's socket file was removed by Stoa");
}

#[test]
fn a_unix_socket_from_systemd_serves_its_unix_listener_with_its_proxy_protocol_setting_per_sd_listen_fds_3(
) {
    unix_socket_activated(ONE_PROCESS);
}

#[test]
fn a_root_parent_passes_a_unix_socket_from_systemd_to_its_www_data_child_per_sd_listen_fds_3() {
    unix_socket_activated(TWO_PROCESSES);
}
