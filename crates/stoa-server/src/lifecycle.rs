//! The process that answers for the service: one place, whichever process
//! that is, for what systemd hears (`notify.rs`), the sockets a new binary
//! is given and the upgrade itself (`upgrade.rs`).
//!
//! In one process that is the server. Under a privileged parent (`broker`)
//! it is the parent, the unit's main pid: the server child has neither
//! `NOTIFY_SOCKET` nor the means to start a binary as root, so it reports
//! what happens to it as [`Event`]s over the broker and the parent's
//! [`Lifecycle`] acts on them exactly as the single process's does on its
//! own. SIGUSR2 sent to the child is passed to the parent
//! ([`Event::Upgrade`]): either pid upgrades the service.

use crate::listen::{self, Inherited, Wanted};
use crate::notify::Notifier;
use crate::server::StartError;
use crate::upgrade::{Exe, ReadyPipe, Upgrades};
use crate::worker;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// What happens to the server, each with a status line for `STATUS=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The workers run: the server is up.
    Ready = 1,
    /// A reload began (SIGHUP).
    Reloading = 2,
    /// The new configuration is in use.
    Reloaded = 3,
    /// The reload failed; the running configuration stays.
    ReloadFailed = 4,
    /// A stop began: the listeners close, responses in flight finish.
    Stopping = 5,
    /// A fresh status line (connections open).
    Status = 6,
    /// SIGUSR2 reached the server child: the parent upgrades.
    Upgrade = 7,
}

impl Event {
    pub(crate) fn from_byte(b: u8) -> Option<Event> {
        Some(match b {
            1 => Event::Ready,
            2 => Event::Reloading,
            3 => Event::Reloaded,
            4 => Event::ReloadFailed,
            5 => Event::Stopping,
            6 => Event::Status,
            7 => Event::Upgrade,
            _ => return None,
        })
    }
}

/// The service's side of this process.
pub(crate) struct Lifecycle {
    notify: Notifier,
    /// A predecessor waits on this for our readiness (started by SIGUSR2).
    ready_pipe: Option<ReadyPipe>,
    upgrades: Upgrades,
    /// One descriptor of every listening socket, for a new binary; closed
    /// when a stop begins, so that new connections are refused.
    handles: Vec<OwnedFd>,
    /// The Unix socket files this process made, removed at its stop
    /// unless a new binary took them over.
    made: Vec<PathBuf>,
    /// A new binary took over: the stop that follows is not the unit's.
    handed_over: bool,
    /// The server child of a privileged parent: events go to the parent.
    child: bool,
}

impl Lifecycle {
    /// Takes what systemd or a previous binary passed in the environment
    /// (and removes it from there): call before any thread starts. The
    /// inherited sockets go to [`Lifecycle::listeners`].
    pub(crate) fn from_env() -> Result<(Lifecycle, Inherited), StartError> {
        let notify = Notifier::from_env();
        let ready_pipe = ReadyPipe::from_env();
        let inherited = Inherited::from_env()?;
        let life = Lifecycle {
            notify,
            ready_pipe: ready_pipe.waiting().then_some(ready_pipe),
            upgrades: Upgrades::new(Exe::at_start()),
            handles: Vec::new(),
            made: Vec::new(),
            handed_over: false,
            child: false,
        };
        Ok((life, inherited))
    }

    /// This process is the server child: what it reports goes to its
    /// parent.
    pub(crate) fn into_child(mut self) -> Lifecycle {
        self.child = true;
        self
    }

    pub(crate) fn is_child(&self) -> bool {
        self.child
    }

    /// Opens or adopts (systemd's, a predecessor's) the sockets for
    /// `wanted`, keeping one descriptor of each for a new binary.
    pub(crate) fn listeners(
        &mut self,
        wanted: &Wanted,
        workers: usize,
        inherited: Inherited,
    ) -> Result<Vec<worker::Sockets>, StartError> {
        let l = listen::acquire(wanted, workers, inherited)?;
        self.handles = l.handles;
        self.made = l.made;
        Ok(l.per_worker)
    }

    /// After the stop, once nothing accepts on them any more: removes the
    /// Unix socket files this process made (as root, under a privileged
    /// parent: its child may not write their directory). Not after a
    /// hand-over: the new binary serves on them.
    pub(crate) fn remove_socket_files(&mut self) {
        let made = std::mem::take(&mut self.made);
        if self.handed_over {
            if !made.is_empty() {
                tracing::info!("unix socket files left to the new binary, which serves them");
            }
            return;
        }
        crate::unix_listen::remove(&made);
    }

    /// The configuration could not be loaded at start.
    pub(crate) fn config_error(&self, e: &dyn std::fmt::Display) {
        self.notify.status(&format!("configuration error: {e}"));
    }

    /// Whether status lines are wanted (a service manager listens, here or
    /// in the parent).
    pub(crate) fn wants_status(&self) -> bool {
        self.child || self.notify.active()
    }

    /// What happened, told to whoever supervises the service.
    pub(crate) fn event(&mut self, ev: Event, status: &str) {
        if self.child {
            crate::broker::notify(ev, status);
            return;
        }
        match ev {
            Event::Ready => match self.ready_pipe.take() {
                // Started by SIGUSR2: the unit follows this process from
                // now on (the predecessor says so too, for
                // NotifyAccess=main), and the predecessor stops.
                Some(pipe) => {
                    self.notify.send(&format!(
                        "MAINPID={}\nREADY=1\nSTATUS={}",
                        std::process::id(),
                        status.replace(['\n', '\r'], " ")
                    ));
                    tracing::info!("upgrade: serving; telling the previous process to stop");
                    pipe.signal();
                }
                None => self.notify.ready(status),
            },
            Event::Reloading => self.notify.reloading(),
            Event::Reloaded | Event::ReloadFailed => self.notify.ready(status),
            Event::Stopping => {
                if !self.handed_over {
                    self.notify.stopping(status);
                }
            }
            Event::Status => self.notify.status(status),
            Event::Upgrade => self.upgrade(),
        }
    }

    /// SIGUSR2: starts the new binary with the listening sockets (the
    /// child asks its parent to).
    pub(crate) fn upgrade(&mut self) {
        if self.child {
            tracing::info!("SIGUSR2 to the server process: the privileged parent upgrades");
            crate::broker::notify(Event::Upgrade, "");
            return;
        }
        self.upgrades.start(&self.handles, &self.notify);
    }

    /// Resolves with the new binary's pid once it serves (the unit is
    /// handed to it; this process then stops gracefully). Never resolves
    /// while no upgrade is in progress.
    pub(crate) async fn upgraded(&mut self) -> u32 {
        loop {
            if let Some(pid) = self.upgrades.finished(&self.notify).await {
                tracing::info!("upgrade: pid {pid} serves; stopping gracefully");
                self.handed_over = true;
                return pid;
            }
        }
    }

    /// A stop begins: the sockets kept for a new binary close (after an
    /// upgrade the new process holds them open), and a stop by hand during
    /// an upgrade (nginx's QUIT to the old master) leaves the new process
    /// serving. Whether a new binary took over.
    pub(crate) fn stop(&mut self) -> bool {
        self.handed_over |= self.upgrades.abandon(&self.notify);
        self.handles.clear();
        self.handed_over
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;
    use std::time::Duration;

    /// A Lifecycle that notifies a socket the test reads, as systemd's.
    fn with_manager(tag: &str) -> (Lifecycle, UnixDatagram, std::path::PathBuf) {
        let path =
            std::env::temp_dir().join(format!("stoa-life-{tag}-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path).expect("bind");
        sock.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let life = Lifecycle {
            notify: Notifier::to(Some(path.clone().into())),
            ready_pipe: None,
            upgrades: Upgrades::new(Err("no binary in a unit test".into())),
            handles: Vec::new(),
            made: Vec::new(),
            handed_over: false,
            child: false,
        };
        (life, sock, path)
    }

    fn recv(sock: &UnixDatagram) -> String {
        let mut buf = [0u8; 4096];
        let n = sock.recv(&mut buf).expect("a datagram");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    /// sd_notify(3): READY=1 at start and after a reload, failed or not
    /// (the service runs either way), RELOADING=1 with MONOTONIC_USEC
    /// before it, STOPPING=1 at a stop.
    #[test]
    fn each_event_is_the_sd_notify_message_systemd_expects_per_sd_notify_3() {
        let (mut life, sock, path) = with_manager("map");
        life.event(Event::Ready, "serving");
        assert_eq!(recv(&sock), "READY=1\nSTATUS=serving");
        life.event(Event::Reloading, "reloading");
        let m = recv(&sock);
        assert!(m.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{m:?}");
        life.event(Event::Reloaded, "serving again");
        assert_eq!(recv(&sock), "READY=1\nSTATUS=serving again");
        life.event(Event::ReloadFailed, "reload failed, still serving");
        assert_eq!(recv(&sock), "READY=1\nSTATUS=reload failed, still serving");
        life.event(Event::Status, "3 connection(s) open");
        assert_eq!(recv(&sock), "STATUS=3 connection(s) open");
        life.event(Event::Stopping, "stopping");
        assert_eq!(recv(&sock), "STOPPING=1\nSTATUS=stopping");
        let _ = std::fs::remove_file(&path);
    }

    /// After a hand-over the unit belongs to the new binary: the old
    /// process's stop must not tell systemd the service is stopping.
    #[test]
    fn after_a_new_binary_took_over_the_stop_sends_no_stopping_1() {
        let (mut life, sock, path) = with_manager("handed");
        life.handed_over = true;
        assert!(life.stop());
        life.event(Event::Stopping, "stopping");
        life.event(Event::Status, "draining");
        assert_eq!(recv(&sock), "STATUS=draining");
        let _ = std::fs::remove_file(&path);
    }
}
