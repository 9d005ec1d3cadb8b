//! Upgrading the binary without dropping a connection, nginx's procedure
//! (nginx.org/en/docs/control.html, "Upgrading Executable on the Fly"):
//!
//! 1. SIGUSR2: the running Stoa starts the binary at the path it was itself
//!    started from (resolved at start: after a package upgrade
//!    `/proc/self/exe` names the deleted old file), with the same arguments,
//!    handing it every listening socket as an inherited descriptor
//!    (`STOA_LISTEN_FDS`, see `listen.rs`) and the write end of a pipe
//!    (`STOA_UPGRADE_FD`).
//! 2. The new process adopts the sockets instead of binding, starts its
//!    workers, and writes `READY <pid>` to the pipe. Both processes accept
//!    on the same sockets meanwhile, so no connection waits on a closed one.
//! 3. The old process then stops gracefully, as on SIGQUIT: it stops
//!    accepting, every response in progress finishes, and it exits 0.
//!
//! If the new binary cannot start, exits, or says nothing within
//! [`READY_TIMEOUT`], the old process logs why and keeps serving (a new
//! process that hangs is stopped with SIGTERM).

use crate::notify::Notifier;
use std::ffi::{OsStr, OsString};
use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

/// The descriptor a new binary reports its readiness on.
pub const READY_FD_VAR: &str = "STOA_UPGRADE_FD";

/// How long a new binary may take to report that it serves.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How this process was started, to start its successor the same way.
#[derive(Debug, Clone)]
pub struct Exe {
    pub path: PathBuf,
    args: Vec<OsString>,
}

impl Exe {
    /// `argv[0]` made absolute against the working directory or found on
    /// `PATH` as the shell found it, symlinks kept (a `/usr/bin/stoa` that
    /// points to a versioned file should start whatever it points to on
    /// the day of the upgrade), and the other arguments as they were.
    pub fn at_start() -> Result<Exe, String> {
        let mut args = std::env::args_os();
        let argv0 = args.next().ok_or("no argv[0]")?;
        let cwd = std::env::current_dir().map_err(|e| format!("working directory: {e}"))?;
        let path = resolve(&argv0, &cwd, std::env::var_os("PATH").as_deref())
            .ok_or_else(|| format!("{}: not found on PATH", argv0.to_string_lossy()))?;
        Ok(Exe {
            path,
            args: args.collect(),
        })
    }
}

/// Where the program `argv0` is: a name with a slash is a path (relative
/// to `cwd`), a bare name is looked up in `path` (execvp(3)'s search).
fn resolve(argv0: &OsStr, cwd: &Path, path: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if argv0.as_bytes().contains(&b'/') {
        // `components` drops the `.` of `./stoa`; `..` stays (it may cross
        // a symlink).
        return Some(cwd.join(argv0).components().collect());
    }
    std::env::split_paths(path?)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                cwd.join(dir)
            }
        })
        .map(|dir| dir.join(argv0))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A new binary started, not yet known to serve.
struct Pending {
    child: tokio::process::Child,
    pid: u32,
    ready: OwnedFd,
}

/// Starts `exe` with the listening sockets `fds` and the service manager's
/// notification socket (`NOTIFY_SOCKET`, removed from this process's
/// environment at start).
fn start(exe: &Exe, fds: &[OwnedFd], notify_socket: Option<&OsStr>) -> Result<Pending, String> {
    let (read, write) = pipe().map_err(|e| format!("pipe: {e}"))?;
    let mut passed: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let list = passed
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join(",");
    passed.push(write.as_raw_fd());
    let mut cmd = tokio::process::Command::new(&exe.path);
    cmd.args(&exe.args)
        .env(crate::listen::UPGRADE_FDS_VAR, list)
        .env(READY_FD_VAR, write.as_raw_fd().to_string())
        .kill_on_drop(false);
    if let Some(n) = notify_socket {
        cmd.env(crate::notify::NOTIFY_SOCKET, n);
    }
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls fcntl(2), which is async-signal-safe, on descriptors that are
    // open in the parent (and so in the child); `passed` was allocated
    // before the fork and is only read.
    unsafe {
        cmd.pre_exec(move || {
            // Every descriptor Stoa opens is close-on-exec; these few must
            // cross the exec.
            for &fd in &passed {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.path.display()))?;
    // Our copy of the write end closes, so that the read end sees EOF as
    // soon as the new process is gone.
    drop(write);
    let pid = child.id().unwrap_or(0);
    Ok(Pending {
        child,
        pid,
        ready: read,
    })
}

impl Pending {
    fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits until the new process reports that it serves (the pid that
    /// does), or why it never will.
    async fn wait(mut self) -> Result<u32, String> {
        use tokio::io::AsyncReadExt;
        let pid = self.pid;
        let read = async {
            let mut rx = tokio::net::unix::pipe::Receiver::from_owned_fd(self.ready)?;
            let mut msg = Vec::new();
            (&mut rx).take(64).read_to_end(&mut msg).await?;
            Ok::<_, std::io::Error>(msg)
        };
        // Empty: it closed the pipe without a word.
        let why = match tokio::time::timeout(READY_TIMEOUT, read).await {
            // The pid that serves: a wrapper script that runs Stoa
            // without `exec` reports its child's, which is the one the
            // unit must follow.
            Ok(Ok(msg)) => match parse_ready(&msg) {
                Some(p) => return Ok(p),
                None => String::new(),
            },
            Ok(Err(e)) => format!("reading its readiness: {e}"),
            Err(_) => format!("not ready within {} s", READY_TIMEOUT.as_secs()),
        };
        // It exited, or is exiting, or hangs.
        let status = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        match status {
            Ok(Ok(st)) if why.is_empty() => Err(format!("pid {pid} exited ({st})")),
            Ok(Ok(st)) => Err(format!("pid {pid}: {why} (exited: {st})")),
            _ => {
                // SAFETY: kill(2) on the child we started and have not
                // reaped (the wait above timed out).
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
                let mut child = self.child;
                // Reaped in the background: its stop may take up to its
                // `shutdown_timeout`.
                tokio::task::spawn_local(async move {
                    let _ = child.wait().await;
                });
                let why = if why.is_empty() {
                    "closed its readiness pipe".to_owned()
                } else {
                    why
                };
                Err(format!("pid {pid}: {why}; sent it SIGTERM"))
            }
        }
    }
}

/// The main loop's side: at most one upgrade at a time.
pub struct Upgrades {
    exe: Result<Exe, String>,
    /// The new process's pid and its outcome.
    current: Option<(u32, Readiness)>,
}

/// A new binary's report: its pid when it serves, or why it never will.
type Readiness = Pin<Box<dyn Future<Output = Result<u32, String>>>>;

impl Upgrades {
    /// `exe`: how this process was started ([`Exe::at_start`]).
    pub fn new(exe: Result<Exe, String>) -> Upgrades {
        Upgrades { exe, current: None }
    }

    /// SIGUSR2: starts the new binary with the listening sockets `fds`, or
    /// says why not.
    pub fn start(&mut self, fds: &[OwnedFd], notify: &Notifier) {
        if let Some((pid, _)) = &self.current {
            tracing::warn!("SIGUSR2 ignored: an upgrade to pid {pid} is already in progress");
            return;
        }
        let started = self
            .exe
            .as_ref()
            .map_err(|e| e.clone())
            .and_then(|exe| start(exe, fds, notify.name()).map(|p| (exe, p)));
        match started {
            Ok((exe, p)) => {
                tracing::info!(
                    "upgrade (SIGUSR2): started {} as pid {}; serving until it is ready",
                    exe.path.display(),
                    p.pid()
                );
                notify.status(&format!("upgrading: waiting for pid {}", p.pid()));
                self.current = Some((p.pid(), Box::pin(p.wait())));
            }
            Err(e) => failed(&e, notify),
        }
    }

    /// Resolves when the upgrade in progress ends: with the new pid when it
    /// serves (the unit is handed to it), `None` when it failed (logged).
    /// Never resolves while no upgrade is in progress.
    pub async fn finished(&mut self, notify: &Notifier) -> Option<u32> {
        let Some((_, wait)) = &mut self.current else {
            return std::future::pending().await;
        };
        let r = wait.as_mut().await;
        self.current = None;
        match r {
            Ok(pid) => {
                notify.send(&format!(
                    "MAINPID={pid}\nSTATUS=pid {pid} took over; the old one is finishing its responses"
                ));
                Some(pid)
            }
            Err(e) => {
                failed(&e, notify);
                None
            }
        }
    }

    /// The server stops while an upgrade is in progress (an operator's
    /// QUIT to the old process, nginx's manual form): the new process holds
    /// the sockets and stays, and the unit follows it. Whether there was
    /// one.
    pub fn abandon(&mut self, notify: &Notifier) -> bool {
        let Some((pid, _)) = self.current.take() else {
            return false;
        };
        tracing::info!("stopping during an upgrade: pid {pid} keeps the sockets and stays");
        notify.send(&format!("MAINPID={pid}\nSTATUS=pid {pid} took over"));
        true
    }
}

fn failed(e: &str, notify: &Notifier) {
    tracing::error!("upgrade failed, still serving: {e}");
    notify.status(&format!("upgrade failed, still serving: {e}"));
}

/// `READY <pid>\n`, the new process's message.
fn parse_ready(msg: &[u8]) -> Option<u32> {
    std::str::from_utf8(msg)
        .ok()?
        .trim_end()
        .strip_prefix("READY ")?
        .parse()
        .ok()
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just opened by pipe2 and are owned by
    // nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The new process's side: the pipe its predecessor waits on, if it was
/// started by an upgrade.
pub struct ReadyPipe(Option<OwnedFd>);

impl ReadyPipe {
    /// Takes `STOA_UPGRADE_FD` from the environment (and removes it) and
    /// marks the descriptor close-on-exec, so that no script or pool process
    /// holds the pipe open. Call before any thread starts.
    pub fn from_env() -> ReadyPipe {
        let fd = std::env::var(READY_FD_VAR)
            .ok()
            .and_then(|v| v.parse::<RawFd>().ok());
        std::env::remove_var(READY_FD_VAR);
        // SAFETY: F_SETFD on a descriptor number only changes its flags,
        // and fails with EBADF when it is not open, which we check.
        let fd = fd.filter(|&fd| {
            fd > 2 && unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } == 0
        });
        // SAFETY: the descriptor is open (checked above) and was passed to
        // this process to own; nothing else here uses it.
        ReadyPipe(fd.map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Whether a predecessor waits for this process.
    pub fn waiting(&self) -> bool {
        self.0.is_some()
    }

    /// Tells the predecessor that this process serves; it then stops.
    pub fn signal(self) {
        if let Some(fd) = self.0 {
            let mut f = std::fs::File::from(fd);
            let msg = format!("READY {}\n", std::process::id());
            if let Err(e) = std::io::Write::write_all(&mut f, msg.as_bytes()) {
                tracing::warn!(
                    "upgrade: cannot tell the previous process that this one serves: {e}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_a_slash_is_a_path_from_the_working_directory_symlinks_kept() {
        let cwd = Path::new("/srv/x");
        assert_eq!(
            resolve(OsStr::new("./bin/stoa"), cwd, None),
            Some(PathBuf::from("/srv/x/bin/stoa"))
        );
        assert_eq!(
            resolve(OsStr::new("/usr/bin/stoa"), cwd, None),
            Some(PathBuf::from("/usr/bin/stoa"))
        );
    }

    #[test]
    fn a_bare_name_is_looked_up_on_path_as_execvp_does() {
        let dir = std::env::temp_dir().join(format!("stoa-upgrade-path-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a")).expect("mkdir");
        std::fs::create_dir_all(dir.join("b")).expect("mkdir");
        // Not executable in a/, executable in b/.
        std::fs::write(dir.join("a/stoa"), "").expect("write");
        std::fs::write(dir.join("b/stoa"), "").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("b/stoa"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let path = std::env::join_paths([dir.join("a"), dir.join("b")]).expect("join");
        assert_eq!(
            resolve(OsStr::new("stoa"), Path::new("/"), Some(&path)),
            Some(dir.join("b/stoa"))
        );
        assert_eq!(
            resolve(OsStr::new("nothere"), Path::new("/"), Some(&path)),
            None
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_ready_message_names_a_pid() {
        assert_eq!(parse_ready(b"READY 1234\n"), Some(1234));
        assert_eq!(parse_ready(b""), None);
        assert_eq!(parse_ready(b"READY x"), None);
    }
}
