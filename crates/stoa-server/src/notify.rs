//! systemd's service notification protocol (sd_notify(3)): newline-separated
//! `KEY=value` assignments sent as one datagram to the Unix socket named by
//! `NOTIFY_SOCKET`. With `Type=notify` the unit is "active" only once
//! `READY=1` arrives, `systemctl reload` waits for `RELOADING=1` ... `READY=1`,
//! and `STATUS=` shows in `systemctl status`.
//!
//! A few lines over std's `UnixDatagram` rather than the `sd-notify` crate:
//! the protocol is one `sendto` per message, std already speaks abstract
//! socket names (`@...`), and the server needs the socket's name afterwards
//! anyway (a new binary started by SIGUSR2 must reach the same socket).
//! Without `NOTIFY_SOCKET` every call does nothing.

use std::ffi::{OsStr, OsString};
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The environment variable systemd sets for `Type=notify` services.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Where notifications go, if anywhere.
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    /// `NOTIFY_SOCKET` as it was, to hand on to a new binary.
    name: Option<OsString>,
}

impl Notifier {
    /// Takes `NOTIFY_SOCKET` and removes it from the environment, so that
    /// CGI scripts and pool processes cannot speak for the service (systemd
    /// unsets it the same way with `sd_notify(unset_environment=1)`). Call
    /// before any thread starts: it changes the environment.
    pub fn from_env() -> Notifier {
        let name = std::env::var_os(NOTIFY_SOCKET);
        if name.is_some() {
            std::env::remove_var(NOTIFY_SOCKET);
        }
        Notifier::to(name)
    }

    /// A notifier for the socket `name` (a path, or `@name` for an abstract
    /// socket); none for `None` or a name it cannot use (logged).
    pub fn to(name: Option<OsString>) -> Notifier {
        let target = name.as_deref().and_then(|n| match open(n) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!("NOTIFY_SOCKET={}: {e}; not notifying systemd", n.display());
                None
            }
        });
        Notifier { target, name }
    }

    /// Whether a service manager is listening.
    pub fn active(&self) -> bool {
        self.target.is_some()
    }

    /// The socket's name, for the environment of a new binary.
    pub fn name(&self) -> Option<&OsStr> {
        self.name.as_deref()
    }

    /// Sends `state` (newline-separated assignments). A failure is logged and
    /// otherwise ignored: serving does not depend on the service manager.
    pub fn send(&self, state: &str) {
        if let Some((sock, addr)) = &self.target {
            if let Err(e) = sock.send_to_addr(state.as_bytes(), addr) {
                tracing::warn!("sd_notify: {e}");
            }
        }
    }

    /// `READY=1` with a status line.
    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)));
    }

    /// `RELOADING=1` stamped with `CLOCK_MONOTONIC`, which `Type=notify-reload`
    /// and newer systemd versions require to match the reload to its request.
    pub fn reloading(&self) {
        if self.active() {
            self.send(&format!(
                "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the configuration",
                monotonic_usec()
            ));
        }
    }

    /// `STOPPING=1` with a status line.
    pub fn stopping(&self, status: &str) {
        self.send(&format!("STOPPING=1\nSTATUS={}", one_line(status)));
    }

    /// A `STATUS=` line only.
    pub fn status(&self, status: &str) {
        self.send(&format!("STATUS={}", one_line(status)));
    }
}

fn open(name: &OsStr) -> std::io::Result<(UnixDatagram, SocketAddr)> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = name.as_bytes();
    let addr = match bytes.strip_prefix(b"@") {
        Some(abstract_name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(abstract_name)?
        }
        None if bytes.starts_with(b"/") => SocketAddr::from_pathname(std::path::Path::new(name))?,
        // systemd also knows `vsock:CID:PORT` (virtual machines); Stoa
        // does not run as a VM's init.
        None => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "neither an absolute path nor an abstract socket name",
            ))
        }
    };
    Ok((UnixDatagram::unbound()?, addr))
}

/// A value on one line: a newline would end the assignment.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// Microseconds of `CLOCK_MONOTONIC`, as `MONOTONIC_USEC=` wants them.
pub fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000 + (ts.tv_nsec as u64) / 1000
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn receiver(tag: &str) -> (UnixDatagram, std::path::PathBuf) {
        let path =
            std::env::temp_dir().join(format!("stoa-notify-{tag}-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path).expect("bind");
        sock.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        (sock, path)
    }

    fn recv(sock: &UnixDatagram) -> String {
        let mut buf = [0u8; 4096];
        let n = sock.recv(&mut buf).expect("a datagram");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn ready_is_one_datagram_with_a_single_line_status_per_sd_notify_3() {
        let (sock, path) = receiver("ready");
        let n = Notifier::to(Some(path.clone().into()));
        assert!(n.active());
        n.ready("serving\non http://x");
        assert_eq!(recv(&sock), "READY=1\nSTATUS=serving on http://x");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn reloading_carries_monotonic_usec_per_sd_notify_3() {
        let (sock, path) = receiver("reload");
        let n = Notifier::to(Some(path.clone().into()));
        let before = monotonic_usec();
        n.reloading();
        let msg = recv(&sock);
        let after = monotonic_usec();
        let usec: u64 = msg
            .lines()
            .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no MONOTONIC_USEC in {msg:?}"));
        assert!(msg.starts_with("RELOADING=1\n"), "{msg:?}");
        assert!(before <= usec && usec <= after, "{before} {usec} {after}");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn an_abstract_socket_name_starting_with_at_is_reached() {
        let name = format!("stoa-notify-abstract-{}", std::process::id());
        use std::os::linux::net::SocketAddrExt;
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("addr");
        let sock = UnixDatagram::bind_addr(&addr).expect("bind");
        sock.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let n = Notifier::to(Some(format!("@{name}").into()));
        n.stopping("bye");
        assert_eq!(recv(&sock), "STOPPING=1\nSTATUS=bye");
    }

    #[test]
    fn without_a_socket_nothing_is_sent_and_nothing_fails() {
        let n = Notifier::to(None);
        assert!(!n.active());
        n.ready("x");
        let relative = Notifier::to(Some("relative/path".into()));
        assert!(!relative.active());
    }
}
