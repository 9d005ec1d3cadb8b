//! Start-up, the worker threads, and signals: SIGHUP reloads the config,
//! SIGQUIT stops gracefully, SIGTERM/SIGINT fast, SIGUSR2 starts a new
//! binary on the same sockets (`upgrade.rs`). Listeners come from
//! `listen.rs`; what systemd and a new binary hear goes through
//! `lifecycle.rs`. Started as root with a user to become, the process that
//! runs this is the server child of a privileged parent (`broker`), which
//! loads the configuration, holds the sockets and answers for the service.

use crate::broker;
use crate::config::{self, ConfigError, Files, Overrides, Runtime};
use crate::lifecycle::{Event, Lifecycle};
use crate::local::Shared;
use crate::upstream::pool::{self, Pool};
use crate::{listen, worker};
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;

/// Where the runtime comes from, so that SIGHUP can rebuild it.
#[derive(Debug, Clone)]
pub struct Source {
    pub config: Option<PathBuf>,
    pub overrides: Overrides,
}

impl Source {
    pub fn load(&self) -> Result<Runtime, ConfigError> {
        self.load_with(&Files::disk(), true)
    }

    /// Loads through `files`; `warn`: log the file's warnings (the server
    /// child leaves that to the parent, which loaded the same file).
    pub(crate) fn load_with(&self, files: &Files, warn: bool) -> Result<Runtime, ConfigError> {
        let rt = match &self.config {
            Some(path) => config::load_with(path, &self.overrides, files),
            None => config::for_dir_with(&self.overrides, files),
        }?;
        if warn {
            for w in &rt.warnings {
                tracing::warn!("{w}");
            }
        }
        Ok(rt)
    }

    /// A fresh runtime: from the privileged parent's bundle when there is
    /// one, else from the disk.
    fn fresh(&self) -> Result<Runtime, ConfigError> {
        match broker::bundle() {
            None => self.load(),
            Some(Ok(r)) => self.load_with(&Files::from_recorded(r), false),
            Some(Err(e)) => Err(e),
        }
    }
}

/// A start-up failure, for the person at the terminal.
#[derive(Debug)]
pub enum StartError {
    Config(ConfigError),
    Bind(SocketAddr, io::Error),
    Io(io::Error),
    /// Could not become the configured user.
    Privileges(String),
    /// Sockets passed by systemd or a previous binary that cannot be used.
    Inherited(String),
    /// A Unix-socket listener could not be made.
    Unix(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(e) => write!(f, "{e}"),
            StartError::Bind(a, e) => write!(f, "cannot listen on {a}: {e}"),
            StartError::Io(e) => write!(f, "{e}"),
            StartError::Privileges(m) | StartError::Unix(m) => write!(f, "{m}"),
            StartError::Inherited(m) => write!(f, "inherited socket: {m}"),
        }
    }
}

impl std::error::Error for StartError {}

/// Raises the open-file limit to its hard maximum: every connection is a
/// descriptor, and the default soft limit (1024) is far below
/// `max_connections`.
fn raise_nofile() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read a valid rlimit struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Runs the server until SIGTERM/SIGINT. `on_ready` is called with the
/// bound addresses, each with its scheme (`http` or `https`), once every
/// listener is open. Started as root with a user to become, this process
/// stays root as the privileged parent and the server runs in a child
/// (`broker`, which calls this again in the child).
pub fn run(
    source: Source,
    on_ready: impl FnOnce(&[(&'static str, SocketAddr)]),
) -> Result<(), StartError> {
    // What systemd or a previous binary passed in the environment is taken
    // (and removed from it) before any thread starts.
    let (life, inherited) = Lifecycle::from_env()?;
    raise_nofile();
    if let Some(child) = broker::server_child_from_env().map_err(StartError::Io)? {
        // Every log file, the error log's and the access logs', at start,
        // on a reload and on SIGUSR1, is opened by the privileged parent.
        crate::log::set_opener(broker::open_append);
        let source = Source {
            config: child.config,
            ..source
        };
        let rt = source.fresh().map_err(StartError::Config)?;
        return serve(source, rt, child.listeners, life.into_child(), on_ready);
    }
    let files = Files::recording();
    let rt = match source.load_with(&files, true) {
        Ok(rt) => rt,
        Err(e) => {
            life.config_error(&e);
            return Err(StartError::Config(e));
        }
    };
    if let Some(acct) =
        crate::privileges::account_to_become(rt.user.as_deref()).map_err(StartError::Privileges)?
    {
        // The cache zones' directories root just made are the server's.
        crate::cache::store::give_dirs_to(acct.uid, acct.gid)
            .map_err(|e| StartError::Privileges(format!("cache zone directory: {e}")))?;
        // The server child orders certificates as the user.
        crate::acme::give_storage_to(&rt.acme, acct.uid, acct.gid)
            .map_err(|e| StartError::Privileges(format!("acme storage: {e}")))?;
        return broker::run_parent(source, rt, files.into_recorded(), acct, life, inherited);
    }
    let mut life = life;
    let per_worker = life.listeners(&wanted(&rt), rt.workers, inherited)?;
    serve(source, rt, per_worker, life, on_ready)
}

/// The signals Stoa acts on, each caught by a handler of the main
/// thread's runtime.
pub(crate) struct Signals {
    pub hup: Signal,
    pub term: Signal,
    pub int: Signal,
    pub usr1: Signal,
    pub quit: Signal,
    pub usr2: Signal,
}

/// The main thread's runtime, with the handlers of [`Signals`] in: the
/// single process's, the server child's and the privileged parent's.
pub(crate) fn signals() -> Result<(tokio::runtime::Runtime, Signals), StartError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(StartError::Io)?;
    let enter = rt.enter();
    let on = |k: SignalKind| signal(k).map_err(StartError::Io);
    let sig = Signals {
        hup: on(SignalKind::hangup())?,
        term: on(SignalKind::terminate())?,
        int: on(SignalKind::interrupt())?,
        usr1: on(SignalKind::user_defined1())?,
        quit: on(SignalKind::quit())?,
        usr2: on(SignalKind::user_defined2())?,
    };
    drop(enter);
    Ok((rt, sig))
}

/// Every address `rt` serves: TCP ones with whether they speak TLS, Unix
/// paths; each with whether its connections begin with a PROXY header.
pub(crate) fn wanted(rt: &Runtime) -> listen::Wanted {
    let plain = rt.listen.iter().map(|a| (*a, false));
    let tls = rt.tls.iter().map(|(a, _)| (*a, true));
    listen::Wanted {
        h3: rt.h3.iter().map(|(a, _)| *a).collect(),
        tcp: plain
            .chain(tls)
            .map(|(a, is_tls)| (a, is_tls, rt.proxy_protocol.on_tcp(a)))
            .collect(),
        unix: rt
            .unix
            .paths
            .iter()
            .map(|p| (p.clone(), rt.proxy_protocol.on_unix(p)))
            .collect(),
        unix_cfg: rt.unix.clone(),
    }
}

/// Serves `rt` on `per_worker` listeners (inherited from the privileged
/// parent by its server child, else opened by `run`), until
/// SIGTERM/SIGINT/SIGQUIT or a new binary takes over.
fn serve(
    source: Source,
    mut rt: Runtime,
    per_worker: Vec<worker::Sockets>,
    mut life: Lifecycle,
    on_ready: impl FnOnce(&[(&'static str, SocketAddr)]),
) -> Result<(), StartError> {
    // Signal handlers go in before anything is announced: a SIGHUP sent the
    // moment the ready line appears must reload, not kill (its default).
    let (signals, sig) = signals()?;
    let Signals {
        mut hup,
        mut term,
        mut int,
        mut usr1,
        mut quit,
        mut usr2,
    } = sig;
    // FastCGI pools are supervised by tasks on this (main) thread.
    let local = tokio::task::LocalSet::new();
    let mut pools = Pools::new()?;
    local.block_on(&signals, async { pools.attach(&mut rt) });
    keep_cache_zones(&rt);
    let rt = rt.into_shared();
    let workers = per_worker.len();
    crate::local::set_worker_count(workers);
    let bound = listen::bound(&per_worker);
    let is_child = life.is_child();
    // What root creates for the user: the pools' socket directory, and the
    // log files, opened as nginx's master does so that their directory
    // need not be writable by the user (by the privileged parent for its
    // child).
    let mut owned: Vec<&std::path::Path> = Vec::new();
    if pools.made_rundir && !is_child {
        owned.push(pools.rundir.as_path());
    }
    // The error log first, so that what follows goes there; then every
    // log file is opened once, so that one that cannot be is a start-up
    // error (in the server child, through the privileged parent, as every
    // log file is: `log::open_append`).
    crate::log::set_error_log(rt.error_log.as_deref(), rt.error_json).map_err(|e| {
        StartError::Privileges(format!("error log {}: {e}", path_of(&rt.error_log)))
    })?;
    let logs = broker::log_paths(&rt);
    for p in &logs {
        crate::log::open_append(p)
            .map_err(|e| StartError::Privileges(format!("log file {}: {e}", p.display())))?;
    }
    owned.extend(logs.iter().map(PathBuf::as_path));
    if is_child {
        // Already the user: the parent made it so between fork and exec.
        // SAFETY: getuid/getgid/getppid have no preconditions.
        let (uid, gid, parent) = unsafe { (libc::getuid(), libc::getgid(), libc::getppid()) };
        tracing::info!(
            "server process {} running as {} (uid {uid}, gid {gid}) under the privileged parent {parent}",
            std::process::id(),
            crate::privileges::user_name(uid).unwrap_or_else(|| uid.to_string()),
        );
    } else {
        // Listeners are bound: root is no longer needed (before any
        // worker, script or pool process starts).
        report_drop(rt.user.as_deref(), &owned)?;
    }
    // Fetching OCSP answers is the serving process's work (not the
    // privileged parent's, nor `stoa check`'s), as the user.
    crate::proto::tls::ocsp::start();
    // Certificates are ordered as the user, by the process that answers
    // the challenges.
    crate::acme::start(&rt.acme);
    let (rt_tx, rt_rx) = watch::channel(rt.clone());
    let (sd_tx, sd_rx) = watch::channel(false);
    let shared = Arc::new(Shared::new(workers));

    let mut threads = Vec::new();
    // Each worker says when its event loop runs: readiness (systemd's, a
    // predecessor's) is announced only then.
    let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
    for (i, listeners) in per_worker.into_iter().enumerate() {
        let rt_rx = rt_rx.clone();
        let sd_rx = sd_rx.clone();
        let shared = shared.clone();
        let up_tx = up_tx.clone();
        let t = std::thread::Builder::new()
            .name(format!("stoa-worker-{i}"))
            .spawn(move || {
                crate::local::set_worker_index(i);
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!("worker {i}: cannot start its runtime: {e}");
                        return;
                    }
                };
                let local = tokio::task::LocalSet::new();
                let _ = up_tx.send(());
                drop(up_tx);
                let worker::Sockets { tcp, unix, udp } = listeners;
                local.block_on(&rt, worker::run(tcp, unix, udp, rt_rx, sd_rx, shared));
            })
            .map_err(StartError::Io)?;
        threads.push(t);
    }
    drop(up_tx);
    if up_rx.iter().take(workers).count() < workers {
        return Err(StartError::Io(io::Error::other(
            "a worker could not start its event loop",
        )));
    }
    let serving = bound
        .iter()
        .map(|(scheme, a)| format!("{scheme}://{a}"))
        .chain(
            rt.unix
                .paths
                .iter()
                .map(|p| format!("unix:{}", p.display())),
        )
        .collect::<Vec<_>>()
        .join(", ");
    tracing::info!(
        "stoa {} serving on {} with {} worker(s) (config: {})",
        env!("CARGO_PKG_VERSION"),
        serving,
        workers,
        rt.source
    );
    let status = |shared: &Shared| {
        format!(
            "serving on {serving}; {} connection(s) open",
            shared
                .connections
                .load(std::sync::atomic::Ordering::Relaxed)
        )
    };
    // Told before the ready line: under a privileged parent, so that a
    // signal sent on that line reaches a server the parent knows is up.
    life.event(Event::Ready, &status(&shared));
    on_ready(&bound);

    // The main thread waits for signals and runs the pool supervisors.
    local.block_on(&signals, async {
        // systemd shows the last STATUS=; keep the connection count fresh.
        let every = std::time::Duration::from_secs(10);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut handed_over = false;
        let graceful = loop {
            tokio::select! {
                _ = hup.recv() => {
                    life.event(Event::Reloading, "reloading the configuration");
                    match reload(&source, &rt_tx, &mut pools) {
                        Ok(()) => life.event(Event::Reloaded, &status(&shared)),
                        Err(e) => life.event(
                            Event::ReloadFailed,
                            &format!("reload failed, still serving the previous configuration: {e}"),
                        ),
                    }
                }
                _ = usr2.recv() => life.upgrade(),
                _ = life.upgraded() => {
                    handed_over = true;
                    break true;
                }
                _ = tick.tick(), if life.wants_status() => {
                    life.event(Event::Status, &status(&shared))
                }
                // nginx's `reopen`: every log file is opened again by its
                // name (after logrotate moved it). The pools' state, which
                // USR1 used to log, is on the status page.
                _ = usr1.recv() => {
                    crate::log::reopen();
                    tracing::info!("log files reopened (SIGUSR1)");
                }
                _ = term.recv() => break false,
                _ = int.recv() => break false,
                _ = quit.recv() => break true,
            }
        };
        handed_over |= life.stop();
        // As nginx: SIGQUIT is the graceful stop (every response in
        // progress finishes, however long it takes), SIGTERM and SIGINT
        // the fast one (`shutdown_timeout`), also after a SIGQUIT.
        shared
            .graceful
            .store(graceful, std::sync::atomic::Ordering::Relaxed);
        life.event(
            Event::Stopping,
            if graceful {
                "stopping gracefully: finishing every response in progress"
            } else {
                "stopping"
            },
        );
        if graceful {
            tracing::info!(
                "stopping gracefully ({}): finishing every response in progress",
                if handed_over { "upgraded" } else { "SIGQUIT" }
            );
            let shared = shared.clone();
            tokio::task::spawn_local(async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
                tracing::info!("fast stop (SIGTERM/SIGINT) during the graceful one");
                shared
                    .graceful
                    .store(false, std::sync::atomic::Ordering::Relaxed);
            });
        } else {
            tracing::info!("stopping: finishing in-flight requests");
        }
        let _ = sd_tx.send(true);
        // Workers drain on their own threads; the supervisors keep running
        // meanwhile, so requests in flight to a pool can finish.
        let joins: Vec<_> = threads
            .into_iter()
            .map(|t| tokio::task::spawn_blocking(move || t.join()))
            .collect();
        for j in joins {
            let _ = j.await;
        }
        pools.stop_all().await;
        // Only the files this process made (none in a server child: its
        // parent made them and removes them once the child has exited).
        life.remove_socket_files();
        Ok::<(), StartError>(())
    })?;
    tracing::info!("stopped");
    Ok(())
}

/// One process started as root: becomes `user` (see `privileges`) and
/// says what it did.
fn report_drop(user: Option<&str>, owned: &[&std::path::Path]) -> Result<(), StartError> {
    match crate::privileges::drop_to(user, owned).map_err(StartError::Privileges)? {
        crate::privileges::Outcome::Dropped(a) => {
            tracing::info!("running as {} (uid {}, gid {})", a.name, a.uid, a.gid)
        }
        crate::privileges::Outcome::KeptRoot => tracing::warn!(
            "running as root (`user = \"root\"`): CGI scripts and spawned pools run as root too"
        ),
        crate::privileges::Outcome::NotRoot => {
            if let Some(u) = user {
                // SAFETY: geteuid has no preconditions.
                let me = unsafe { libc::geteuid() };
                if crate::privileges::user_name(me).as_deref() != Some(u) {
                    tracing::warn!("`user = \"{u}\"` ignored: Stoa was not started as root");
                }
            }
        }
    }
    Ok(())
}

/// The running FastCGI pools, by name, kept across reloads.
struct Pools {
    running: std::collections::HashMap<String, Arc<Pool>>,
    /// Private directory for the pools' sockets (created when needed).
    rundir: PathBuf,
    made_rundir: bool,
    /// Numbers each pool started, so that a changed pool's new processes
    /// never take the sockets of the generation still draining.
    generation: u64,
}

impl Pools {
    fn new() -> Result<Pools, StartError> {
        let rundir = std::env::temp_dir().join(format!("stoa-{}", std::process::id()));
        Ok(Pools {
            running: Default::default(),
            rundir,
            made_rundir: false,
            generation: 0,
        })
    }

    /// Gives `rt` its running pools: an unchanged pool keeps running, a new
    /// or changed one starts, one no longer configured stops.
    fn attach(&mut self, rt: &mut Runtime) {
        let mut next = std::collections::HashMap::new();
        for spec in &rt.pool_specs {
            let pool = match self.running.remove(&spec.name) {
                Some(p) if p.spec == *spec => p,
                old => {
                    if !self.made_rundir {
                        self.rundir = make_rundir(&self.rundir);
                        self.made_rundir = true;
                    }
                    self.generation += 1;
                    let p = Arc::new(Pool::new(
                        spec.clone(),
                        Some(self.rundir.clone()),
                        self.generation,
                    ));
                    crate::upstream::start(&p);
                    if crate::upstream::tls::unverified(&spec.kind) {
                        tracing::warn!(
                            "pool {}: TLS to its servers with `verify = false`: any certificate is accepted",
                            spec.name
                        );
                    }
                    if let Some(old) = old {
                        tracing::info!(
                            "pool {}: configuration changed, starting a new generation; the old one drains",
                            spec.name
                        );
                        pool::retire(old, &p);
                    }
                    p
                }
            };
            rt.pools.push(pool.clone());
            next.insert(spec.name.clone(), pool);
        }
        for (name, old) in self.running.drain() {
            tracing::info!("pool {name}: removed from the configuration, stopping it");
            tokio::task::spawn_local(async move { pool::stop(&old).await });
        }
        self.running = next;
    }

    async fn stop_all(&mut self) {
        for p in self.running.values() {
            pool::stop(p).await;
        }
        if self.made_rundir {
            let _ = std::fs::remove_dir_all(&self.rundir);
        }
    }
}

/// Makes the pools' private directory at `want` (`/tmp/stoa-PID`), or
/// beside it when that name is taken. A directory of that name is left by
/// a process that had our pid and was killed before it could remove it
/// (pids are reused); it may belong to another user (a root Stoa, where
/// we run as `nobody`), so it is never reused: our sockets go in a
/// directory only we made, mode 0700.
fn make_rundir(want: &Path) -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let mut dir = want.to_path_buf();
    for n in 1..=100u32 {
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return dir,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Stale (no live process has our pid): removed when we may.
                if std::fs::remove_dir_all(&dir).is_ok()
                    && std::fs::DirBuilder::new().mode(0o700).create(&dir).is_ok()
                {
                    return dir;
                }
                let mut name = want.as_os_str().to_owned();
                name.push(format!(".{n}"));
                dir = PathBuf::from(name);
            }
            Err(e) => {
                tracing::error!("pools' run directory {}: {e}", dir.display());
                return dir;
            }
        }
    }
    dir
}

fn path_of(p: &Option<PathBuf>) -> String {
    p.as_deref()
        .map_or_else(|| "stderr".to_owned(), |p| p.display().to_string())
}

/// Keeps in the response cache's registry only the zones `rt`'s routes
/// use: a zone a reload dropped leaves the status page, and its objects
/// leave memory once the last request of the old configuration is done
/// (its files stay on disk for a later configuration to find).
fn keep_cache_zones(rt: &Runtime) {
    let names: Vec<&str> = rt
        .sites
        .iter()
        .flat_map(|s| std::iter::once(&s.edge).chain(s.routes.iter().map(|r| &r.edge)))
        .filter_map(|e| e.cache.as_deref())
        .map(|c| c.zone.name())
        .collect();
    crate::cache::store::retain(&names);
}

fn reload(
    source: &Source,
    tx: &watch::Sender<Arc<Runtime>>,
    pools: &mut Pools,
) -> Result<(), ConfigError> {
    match source.fresh() {
        Ok(mut new) => {
            let old = tx.borrow().clone();
            if (&new.error_log, new.error_json) != (&old.error_log, old.error_json) {
                if let Err(e) = crate::log::set_error_log(new.error_log.as_deref(), new.error_json)
                {
                    let e = ConfigError {
                        file: old.source.clone(),
                        line: None,
                        key: "log.error".to_owned(),
                        message: format!("error log {}: {e}", path_of(&new.error_log)),
                    };
                    tracing::error!("reload failed, keeping the running configuration: {e}");
                    return Err(e);
                }
            }
            pools.attach(&mut new);
            let tls_addrs = |rt: &Runtime| rt.tls.iter().map(|(a, _)| *a).collect::<Vec<_>>();
            if new.listen != old.listen
                || new.unix != old.unix
                || new.proxy_protocol.tcp != old.proxy_protocol.tcp
                || new.proxy_protocol.unix != old.proxy_protocol.unix
                || new.workers != old.workers
                || tls_addrs(&new) != tls_addrs(&old)
                || new.user != old.user
            {
                tracing::warn!(
                    "reload: `listen`, `tls.listen`, `workers`, `user`, `[unix_socket]` and `proxy_protocol.listen` changes take effect on restart only"
                );
            }
            keep_cache_zones(&new);
            crate::acme::start(&new.acme);
            let _ = tx.send(new.into_shared());
            tracing::info!("reloaded {}", old.source);
            Ok(())
        }
        Err(e) => {
            tracing::error!("reload failed, keeping the running configuration: {e}");
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("stoa-unit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("scratch dir");
        d
    }

    /// A directory left by a killed process that had our pid is not
    /// reused as it is (it may be another user's): it is replaced by one
    /// of ours, mode 0700.
    #[test]
    fn a_stale_run_directory_of_our_name_is_replaced_by_a_fresh_private_one() {
        let base = scratch("rundir-stale");
        let want = base.join("stoa-1");
        std::fs::create_dir(&want).expect("stale dir");
        std::fs::write(want.join("old.sock"), b"").expect("stale file");
        let got = make_rundir(&want);
        assert_eq!(got, want);
        assert!(!want.join("old.sock").exists());
        let mode = std::fs::metadata(&got).expect("stat").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// A name taken by something that cannot be removed as a directory
    /// gives a directory beside it rather than sockets nobody can create.
    #[test]
    fn a_run_directory_name_that_cannot_be_taken_gives_one_beside_it() {
        let base = scratch("rundir-taken");
        let want = base.join("stoa-2");
        std::fs::write(&want, b"not a directory").expect("file in the way");
        let got = make_rundir(&want);
        assert_eq!(got, base.join("stoa-2.1"));
        assert!(got.is_dir());
        assert!(want.is_file(), "what was there is left alone");
        let _ = std::fs::remove_dir_all(&base);
    }
}
