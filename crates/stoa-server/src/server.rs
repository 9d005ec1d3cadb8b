//! Start-up, the worker threads, and signals: SIGHUP reloads the config,
//! SIGTERM/SIGINT stop gracefully.

use crate::config::{self, ConfigError, Overrides, Runtime};
use crate::local::Shared;
use crate::upstream::pool::{self, Pool};
use crate::worker;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// Where the runtime comes from, so that SIGHUP can rebuild it.
#[derive(Debug, Clone)]
pub struct Source {
    pub config: Option<PathBuf>,
    pub overrides: Overrides,
}

impl Source {
    pub fn load(&self) -> Result<Runtime, ConfigError> {
        let rt = match &self.config {
            Some(path) => config::load(path, &self.overrides),
            None => config::for_dir(&self.overrides),
        }?;
        for w in &rt.warnings {
            tracing::warn!("{w}");
        }
        Ok(rt)
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
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(e) => write!(f, "{e}"),
            StartError::Bind(a, e) => write!(f, "cannot listen on {a}: {e}"),
            StartError::Io(e) => write!(f, "{e}"),
            StartError::Privileges(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for StartError {}

/// Opens one SO_REUSEPORT listener per worker on `addr`. With port 0 the
/// first socket picks the port and the others join it.
fn bind_all(addr: SocketAddr, n: usize) -> Result<Vec<std::net::TcpListener>, StartError> {
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
/// listener is open.
pub fn run(
    source: Source,
    on_ready: impl FnOnce(&[(&'static str, SocketAddr)]),
) -> Result<(), StartError> {
    let mut rt = source.load().map_err(StartError::Config)?;
    raise_nofile();
    // Signal handlers go in before anything is announced: a SIGHUP sent the
    // moment the ready line appears must reload, not kill (its default).
    let signals = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(StartError::Io)?;
    let (mut hup, mut term, mut int, mut usr1, mut quit) = {
        let _enter = signals.enter();
        (
            signal(SignalKind::hangup()).map_err(StartError::Io)?,
            signal(SignalKind::terminate()).map_err(StartError::Io)?,
            signal(SignalKind::interrupt()).map_err(StartError::Io)?,
            signal(SignalKind::user_defined1()).map_err(StartError::Io)?,
            signal(SignalKind::quit()).map_err(StartError::Io)?,
        )
    };
    // FastCGI pools are supervised by tasks on this (main) thread.
    let local = tokio::task::LocalSet::new();
    let mut pools = Pools::new()?;
    local.block_on(&signals, async { pools.attach(&mut rt) });
    let rt = Arc::new(rt);
    let workers = rt.workers;
    crate::local::set_worker_count(workers);
    // listeners[w] are worker w's sockets, one per address, each with
    // its configured address when it speaks TLS (the key to its
    // certificates in every later runtime).
    let mut per_worker: Vec<Vec<worker::Listener>> = (0..workers).map(|_| Vec::new()).collect();
    let mut bound = Vec::new();
    let plain = rt.listen.iter().map(|a| (*a, false));
    let tls = rt.tls.iter().map(|(a, _)| (*a, true));
    for (addr, is_tls) in plain.chain(tls) {
        let socks = bind_all(addr, workers)?;
        if let Some(a) = socks.first().and_then(|s| s.local_addr().ok()) {
            bound.push((if is_tls { "https" } else { "http" }, a));
            if is_tls && addr.port() == 0 {
                crate::route::set_bound_https_port(a.port());
            }
        }
        for (w, s) in socks.into_iter().enumerate() {
            per_worker[w].push(worker::Listener {
                socket: s,
                tls: is_tls.then_some(addr),
            });
        }
    }
    // Listeners are bound: root is no longer needed (before any worker,
    // script or pool process starts).
    // What root creates for the user: the pools' socket directory, and the
    // access log, opened here as nginx's master does so that its
    // directory need not be writable by the user.
    let mut owned: Vec<&std::path::Path> = Vec::new();
    if pools.made_rundir {
        owned.push(pools.rundir.as_path());
    }
    // The error log first, so that what follows goes there.
    crate::log::set_error_log(rt.error_log.as_deref(), rt.error_json).map_err(|e| {
        StartError::Privileges(format!("error log {}: {e}", path_of(&rt.error_log)))
    })?;
    let logs = log_files(&rt);
    for p in &logs {
        crate::log::open_append(p)
            .map_err(|e| StartError::Privileges(format!("access log {}: {e}", p.display())))?;
    }
    owned.extend(logs.iter().map(PathBuf::as_path));
    if let Some(p) = rt.error_log.as_deref() {
        owned.push(p);
    }
    match crate::privileges::drop_to(rt.user.as_deref(), &owned).map_err(StartError::Privileges)? {
        crate::privileges::Outcome::Dropped(a) => {
            tracing::info!("running as {} (uid {}, gid {})", a.name, a.uid, a.gid)
        }
        crate::privileges::Outcome::KeptRoot => tracing::warn!(
            "running as root (`user = \"root\"`): CGI scripts and spawned pools run as root too"
        ),
        crate::privileges::Outcome::NotRoot => {
            if let Some(u) = rt.user.as_deref() {
                // SAFETY: geteuid has no preconditions.
                let me = unsafe { libc::geteuid() };
                if crate::privileges::user_name(me).as_deref() != Some(u) {
                    tracing::warn!("`user = \"{u}\"` ignored: Stoa was not started as root");
                }
            }
        }
    }
    let (rt_tx, rt_rx) = watch::channel(rt.clone());
    let (sd_tx, sd_rx) = watch::channel(false);
    let shared = Arc::new(Shared::new(workers));

    let mut threads = Vec::new();
    for (i, listeners) in per_worker.into_iter().enumerate() {
        let rt_rx = rt_rx.clone();
        let sd_rx = sd_rx.clone();
        let shared = shared.clone();
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
                local.block_on(&rt, worker::run(listeners, rt_rx, sd_rx, shared));
            })
            .map_err(StartError::Io)?;
        threads.push(t);
    }
    tracing::info!(
        "stoa {} serving on {} with {} worker(s) (config: {})",
        env!("CARGO_PKG_VERSION"),
        bound
            .iter()
            .map(|(scheme, a)| format!("{scheme}://{a}"))
            .collect::<Vec<_>>()
            .join(", "),
        workers,
        rt.source
    );
    on_ready(&bound);

    // The main thread waits for signals and runs the pool supervisors.
    local.block_on(&signals, async {
        let graceful = loop {
            tokio::select! {
                _ = hup.recv() => reload(&source, &rt_tx, &mut pools),
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
        // As nginx: SIGQUIT is the graceful stop (every response in
        // progress finishes, however long it takes), SIGTERM and SIGINT
        // the fast one (`shutdown_timeout`), also after a SIGQUIT.
        shared
            .graceful
            .store(graceful, std::sync::atomic::Ordering::Relaxed);
        if graceful {
            tracing::info!("stopping gracefully (SIGQUIT): finishing every response in progress");
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
        Ok::<(), StartError>(())
    })?;
    tracing::info!("stopped");
    Ok(())
}

/// The running FastCGI pools, by name, kept across reloads.
struct Pools {
    running: std::collections::HashMap<String, Arc<Pool>>,
    /// Private directory for the pools' sockets (created when needed).
    rundir: PathBuf,
    made_rundir: bool,
}

impl Pools {
    fn new() -> Result<Pools, StartError> {
        let rundir = std::env::temp_dir().join(format!("stoa-{}", std::process::id()));
        Ok(Pools {
            running: Default::default(),
            rundir,
            made_rundir: false,
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
                    if let Some(old) = old {
                        tracing::info!("pool {}: configuration changed, restarting it", spec.name);
                        tokio::task::spawn_local(async move { pool::stop(&old).await });
                    }
                    if !self.made_rundir {
                        use std::os::unix::fs::DirBuilderExt;
                        let _ = std::fs::DirBuilder::new()
                            .mode(0o700)
                            .recursive(true)
                            .create(&self.rundir);
                        self.made_rundir = true;
                    }
                    let p = Arc::new(Pool::new(spec.clone(), Some(self.rundir.clone())));
                    pool::start(&p);
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

/// Every access-log file of a runtime: the server's and the routes' own.
fn log_files(rt: &Runtime) -> Vec<PathBuf> {
    use crate::log::access::Dest;
    let routes = rt.sites.iter().flat_map(|s| s.routes.iter());
    let mut files: Vec<PathBuf> = std::iter::once(&rt.access_log)
        .chain(routes.filter_map(|r| r.access_log.as_ref()))
        .filter_map(|l| match &l.dest {
            Dest::File(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    files.sort();
    files.dedup();
    files
}

fn path_of(p: &Option<PathBuf>) -> String {
    p.as_deref()
        .map_or_else(|| "stderr".to_owned(), |p| p.display().to_string())
}

fn reload(source: &Source, tx: &watch::Sender<Arc<Runtime>>, pools: &mut Pools) {
    match source.load() {
        Ok(mut new) => {
            let old = tx.borrow().clone();
            if (&new.error_log, new.error_json) != (&old.error_log, old.error_json) {
                if let Err(e) = crate::log::set_error_log(new.error_log.as_deref(), new.error_json)
                {
                    tracing::error!(
                        "reload failed, keeping the running configuration: error log {}: {e}",
                        path_of(&new.error_log)
                    );
                    return;
                }
            }
            pools.attach(&mut new);
            let tls_addrs = |rt: &Runtime| rt.tls.iter().map(|(a, _)| *a).collect::<Vec<_>>();
            if new.listen != old.listen
                || new.workers != old.workers
                || tls_addrs(&new) != tls_addrs(&old)
            {
                tracing::warn!(
                    "reload: `listen`, `tls.listen` and `workers` changes take effect on restart only"
                );
            }
            let _ = tx.send(Arc::new(new));
            tracing::info!("reloaded {}", old.source);
        }
        Err(e) => tracing::error!("reload failed, keeping the running configuration: {e}"),
    }
}
