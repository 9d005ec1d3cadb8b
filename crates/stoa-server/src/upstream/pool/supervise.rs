//! Supervision of spawned processes: each slot's listening socket (fd 0,
//! as the FastCGI specification and libfcgi expect; it belongs to the slot
//! and outlives restarts, so connections queued in its backlog survive a
//! crash of the process behind it), spawning, restarts with back-off,
//! recycling, and stopping.

use super::proc::{Proc, ProcState};
use super::spec::PoolKind;
use super::Pool;
use crate::upstream::target::Target;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `NAME.GEN-SLOT.sock`: a pool name has no '.', so no two pools, and no two
/// generations of one, can share a socket.
pub(super) fn socket_name(pool: &str, generation: u64, slot: usize) -> String {
    format!("{pool}.{generation}-{slot}.sock")
}

/// Runs one process slot: spawn, watch, restart with back-off, recycle.
pub(super) async fn supervise(pool: Arc<Pool>, index: usize) {
    let PoolKind::Spawn {
        command,
        cwd,
        env,
        min,
        user,
        ..
    } = pool.spec.kind.clone()
    else {
        return;
    };
    let proc = pool.procs[index].clone();
    let Target::Unix(sock_path) = proc.target.clone() else {
        return;
    };
    let listener = match slot_listener(&pool, index, &sock_path) {
        Ok(fd) => fd,
        Err(e) => {
            tracing::error!(
                "pool {}: cannot create {}: {e}",
                pool.spec.name,
                sock_path.display()
            );
            proc.set_state(ProcState::Dead);
            return;
        }
    };
    let mut backoff = Duration::from_millis(100);
    let mut recent_exits: Vec<Instant> = Vec::new();
    loop {
        if pool.stopping.load(Ordering::Acquire) {
            break;
        }
        proc.set_state(ProcState::Starting);
        proc.served.store(0, Ordering::Relaxed);
        let stdin = match listener.try_clone() {
            Ok(fd) => Stdio::from(fd),
            Err(e) => {
                tracing::error!("pool {}: {e}", pool.spec.name);
                break;
            }
        };
        let activation = pool.spec.socket_activation;
        let mut cmd = if activation {
            // LISTEN_PID must name the application's own pid, known only
            // after the fork, and std builds the environment before it: a
            // shell sets it to its own pid and execs the program, which
            // keeps that pid.
            let mut c = tokio::process::Command::new("/bin/sh");
            c.arg("-c")
                .arg("LISTEN_PID=$$; export LISTEN_PID; exec \"$0\" \"$@\"")
                .args(&command[..]);
            c
        } else {
            let mut c = tokio::process::Command::new(&command[0]);
            c.args(&command[1..]);
            c
        };
        cmd.current_dir(&cwd)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)));
        if activation {
            cmd.env("LISTEN_FDS", "1");
        }
        cmd.stdin(stdin)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        cmd.process_group(0);
        let parent = std::process::id() as libc::pid_t;
        // A pool's own user, when Stoa kept root to allow it (checked at
        // load; not root here means nothing to switch).
        let run_as = user.clone().filter(|_| crate::privileges::is_root());
        // SAFETY: dup2, prctl, getppid, setgroups, setgid and setuid are
        // plain syscalls, safe between fork and exec; the account was looked up
        // before the fork. PR_SET_PDEATHSIG makes the kernel stop the
        // application if Stoa itself dies, so no process is ever orphaned;
        // a Stoa that died before the prctl took effect is seen by its
        // pid, and the child gives up.
        unsafe {
            cmd.pre_exec(move || {
                // Socket activation's fd 3 is the same listening socket.
                if activation && libc::dup2(0, 3) != 3 {
                    return Err(std::io::Error::last_os_error());
                }
                // The user switch first: a change of credentials clears the
                // parent-death signal (prctl(2)), and a pool with its own
                // `user` outlived a killed Stoa when it came after.
                if let Some(a) = &run_as {
                    a.become_it()?;
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    return Err(std::io::Error::other("stoa exited while starting it"));
                }
                Ok(())
            });
        }
        let started = Instant::now();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("pool {}: cannot start {:?}: {e}", pool.spec.name, command);
                proc.set_state(ProcState::Dead);
                let now = Instant::now();
                recent_exits.retain(|t| now.duration_since(*t) < Duration::from_secs(60));
                recent_exits.push(now);
                if recent_exits.len() >= 5 {
                    tracing::error!(
                        "pool {}: process #{index} is crash-looping (cannot start, {} tries in a minute)",
                        pool.spec.name,
                        recent_exits.len()
                    );
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        let pid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        if pool.stopping.load(Ordering::Acquire) {
            // Stopped while it started: `stop` marked the slot Retiring,
            // which Running would overwrite. It never had a request.
            stop_child(&mut child, pid).await;
            break;
        }
        proc.pid.store(pid, Ordering::Relaxed);
        // FCGI_GET_VALUES goes out with the first request (see
        // `Proc::ask_values`): a probe on a connection of its own would
        // hold a single-threaded application until it timed out.
        proc.reset_values(&pool.spec);
        proc.set_state(ProcState::Running);
        pool.wake_all();

        let retired = tokio::select! {
            status = child.wait() => {
                proc.set_state(ProcState::Dead);
                proc.drop_idle();
                let why = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                tracing::warn!("pool {}: process #{index} (pid {pid}) exited: {why}", pool.spec.name);
                false
            }
            _ = wait_retire(&proc) => true,
        };
        proc.pid.store(0, Ordering::Relaxed);
        if retired {
            // Recycle or scale down: it has no request left; let it go.
            stop_child(&mut child, pid).await;
            if pool.stopping.load(Ordering::Acquire) {
                break;
            }
            let served = proc.served.load(Ordering::Relaxed);
            if pool.spec.max_requests > 0 && served >= pool.spec.max_requests {
                tracing::info!(
                    "pool {}: recycled process #{index} after {served} requests",
                    pool.spec.name
                );
                backoff = Duration::from_millis(100);
                continue;
            }
            proc.set_state(ProcState::Stopped);
            let _ = min;
            return;
        }
        if pool.stopping.load(Ordering::Acquire) {
            break;
        }
        proc.restarts.fetch_add(1, Ordering::Relaxed);
        // A process that served and lived past its start-up (or simply ran
        // 10 s) was killed from outside: the OOM killer, an operator's
        // kill -9. Start another at once, as php-fpm does: it cannot spin.
        // Only a crash loop (dying within a second, or before its first
        // request) backs off, exponentially, and is reported.
        let lived = started.elapsed();
        let served = proc.served.load(Ordering::Relaxed);
        if lived >= Duration::from_secs(10) || lived >= Duration::from_secs(1) && served > 0 {
            backoff = Duration::from_millis(100);
            continue;
        }
        let now = Instant::now();
        recent_exits.retain(|t| now.duration_since(*t) < Duration::from_secs(60));
        recent_exits.push(now);
        if recent_exits.len() >= 5 {
            tracing::error!(
                "pool {}: process #{index} is crash-looping ({} exits in a minute); next start in {:?}",
                pool.spec.name,
                recent_exits.len(),
                backoff
            );
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
    proc.set_state(ProcState::Stopped);
}

async fn wait_retire(proc: &Proc) {
    loop {
        proc.retire.notified().await;
        if proc.state() == ProcState::Retiring {
            // Wait for its requests to finish (each Lease drop notifies).
            while proc.busy() > 0 {
                proc.retire.notified().await;
            }
            return;
        }
    }
}

/// SIGTERM, a grace period, then SIGKILL for the whole group.
async fn stop_child(child: &mut tokio::process::Child, pid: i32) {
    if pid > 0 {
        // SAFETY: signals the process group we created for this child,
        // whose leader has not been reaped yet.
        unsafe {
            libc::kill(-pid, libc::SIGTERM);
        }
    }
    if tokio::time::timeout(Duration::from_secs(3), child.wait())
        .await
        .is_err()
        && pid > 0
    {
        // SAFETY: as above.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
        let _ = child.wait().await;
    }
}

/// The slot's listening socket, created once and kept across restarts.
fn slot_listener(pool: &Pool, index: usize, path: &Path) -> std::io::Result<OwnedFd> {
    let mut ls = pool
        .listeners
        .lock()
        .map_err(|_| std::io::Error::other("poisoned"))?;
    if let Some(Some(fd)) = ls.get(index) {
        return fd.try_clone();
    }
    let _ = std::fs::remove_file(path);
    let l = std::os::unix::net::UnixListener::bind(path)?;
    let fd: OwnedFd = l.into();
    let keep = fd.try_clone()?;
    if let Some(slot) = ls.get_mut(index) {
        *slot = Some(keep);
    }
    Ok(fd)
}

/// Stops the pool: no new request is leased here (a successor set by
/// [`retire`] takes them; waiters go there too), requests in flight finish
/// (as an nginx worker's do after a reload), then the processes stop and
/// the pool removes its own sockets, and only those.
pub async fn stop(pool: &Arc<Pool>) {
    pool.stopping.store(true, Ordering::Release);
    // Waiters see `stopping` and move to the successor, or fail at once.
    pool.wake_all();
    if let PoolKind::Remote { .. } = pool.spec.kind {
        // Nothing of ours runs there: just forget the connections.
        for p in &pool.procs {
            p.drop_idle();
            p.set_state(ProcState::Stopped);
        }
        return;
    }
    for p in &pool.procs {
        if p.state() != ProcState::Stopped {
            p.set_state(ProcState::Retiring);
            p.drop_idle();
            p.retire.notify_one();
        }
    }
    // Supervisors stop each child once its requests are done. While any
    // request is in flight the pool waits (each request has its own time
    // limits); after the last one, its processes get a few seconds to go.
    let mut grace: Option<Instant> = None;
    while pool
        .procs
        .iter()
        .any(|p| !matches!(p.state(), ProcState::Stopped | ProcState::Dead))
    {
        if pool.procs.iter().any(|p| p.busy() > 0) {
            grace = None;
        } else if Instant::now() >= *grace.get_or_insert_with(|| Instant::now() + STOP_GRACE) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for p in &pool.procs {
        let pid = p.pid.load(Ordering::Relaxed);
        if pid > 0 {
            // SAFETY: the group of a child we spawned and still track.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    // Its listening sockets: closed here (a supervisor still in its
    // restart back-off holds a copy until it sees `stopping`) and unlinked.
    if let Ok(mut ls) = pool.listeners.lock() {
        ls.iter_mut().for_each(|l| *l = None);
    }
    if pool.rundir.is_some() {
        for p in &pool.procs {
            if let Target::Unix(path) = &p.target {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// How long a stopping pool's processes, with no request left, have to
/// exit (SIGTERM, then SIGKILL after 3 s) before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(5);
