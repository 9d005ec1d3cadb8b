//! FastCGI application pools: the processes Stoa spawns (or the remote
//! addresses it is given), their supervision, and the choice of a process
//! for each request.
//!
//! A pool lives across reloads; workers reach it through `Runtime::pools`.
//! Its state is a few atomics and one short mutex per process (the stash of
//! kept-alive connections), so any worker can route to any process.
//!
//! Spawned processes get their own listening Unix socket as fd 0, as the
//! FastCGI specification and libfcgi expect; the socket belongs to the slot
//! and outlives restarts, so connections queued in its backlog survive a
//! crash of the process behind it.
//!
//! A reload that changes a pool starts a new generation beside the old one
//! (`NAME.GEN-SLOT.sock`: the two never share a socket), points the old one
//! at it ([`retire`]) and drains the old one: its requests in flight finish,
//! new leases go to the successor, and it removes only its own sockets.

use crate::local::{worker_count, worker_index};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Where requests are sent within a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Affinity {
    None,
    Cookie(String),
    Header(String),
    Query(String),
    ClientIp,
}

impl Affinity {
    pub fn parse(s: &str) -> Result<Affinity, String> {
        let (kind, arg) = s.split_once(':').unwrap_or((s, ""));
        let need = |a: &str| {
            if a.is_empty() {
                Err(format!("`{s}` needs a name after the colon"))
            } else {
                Ok(a.to_owned())
            }
        };
        match kind {
            "none" => Ok(Affinity::None),
            "cookie" => need(arg).map(Affinity::Cookie),
            "header" => need(arg).map(Affinity::Header),
            "query" => need(arg).map(Affinity::Query),
            "client-ip" => Ok(Affinity::ClientIp),
            _ => Err(format!(
                "`{s}`: affinity is \"cookie:NAME\", \"header:NAME\", \"query:NAME\", \"client-ip\" or \"none\""
            )),
        }
    }
}

/// Milliseconds on a process-wide monotonic clock (for `down_until`,
/// which outlives any one pool's clock).
fn mono_ms() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Least-busy or round-robin, when no affinity key applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balance {
    LeastBusy,
    RoundRobin,
    /// Power of two choices on peak-EWMA latency (Finagle, Linkerd): two
    /// servers drawn at random, the one with the lower latency estimate
    /// times (requests in flight + 1) gets the request.
    P2cEwma,
}

/// A pool as configured. Two specs that compare equal describe the same
/// pool, which a reload keeps running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub name: String,
    pub kind: PoolKind,
    pub max_requests: u64,
    pub affinity: Affinity,
    pub balance: Balance,
    pub queue: usize,
    pub queue_timeout: Duration,
    /// Time allowed for a response head, then between pieces of output.
    pub timeout: Duration,
    /// Requests a spawned process takes at once when it does not say
    /// (FCGI_MAX_CONNS); for addresses, the same for each address.
    pub default_capacity: usize,
    /// `capacity` from the config: what the operator says a process (or
    /// address) serves at once. It makes kept-alive connections safe
    /// without FCGI_GET_VALUES (php-fpm: `pm.max_children`); a smaller
    /// FCGI_MAX_CONNS / MAX_REQS answer still lowers it.
    pub stated_capacity: Option<usize>,
    /// How long a kept-alive connection may wait parked before it is
    /// closed: to a process-per-connection server (php-fpm) a parked
    /// connection pins a whole child that its other clients then lack.
    pub keepalive_timeout: Duration,
    /// What its processes speak (the upstream layer only records it: each
    /// protocol's handler speaks it).
    pub protocol: Protocol,
    /// Active health checks (HTTP pools).
    pub health: Option<Health>,
    /// Spawned processes also get their listening socket as fd 3 with
    /// LISTEN_FDS=1 and LISTEN_PID (systemd socket activation), besides
    /// fd 0.
    pub socket_activation: bool,
}

/// What a pool's processes speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    FastCgi,
    Http,
}

/// `health = {...}`: an HTTP GET of `path` every `interval`; `fails`
/// failures in a row take a process out of rotation, `passes` successes
/// put it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub path: String,
    pub interval: Duration,
    pub timeout: Duration,
    pub fails: u32,
    pub passes: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolKind {
    /// Processes Stoa spawns and supervises.
    Spawn {
        command: Vec<String>,
        /// Working directory (the config file's directory).
        cwd: PathBuf,
        env: Vec<(String, String)>,
        min: usize,
        max: usize,
        idle_timeout: Duration,
        /// Run as this account instead of Stoa's own (Stoa must keep root).
        user: Option<crate::privileges::Account>,
    },
    /// Processes someone else runs.
    Remote { addresses: Vec<Target> },
}

/// How to reach one application process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl Target {
    pub fn parse(s: &str, base: &Path) -> Result<Target, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            let p = Path::new(p);
            return Ok(Target::Unix(if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }));
        }
        parse_addr(s).map(Target::Tcp)
    }
}

/// As the configuration writes it: `127.0.0.1:8080`, `unix:/run/app.sock`.
impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tcp(a) => write!(f, "{a}"),
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// A process slot's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ProcState {
    Stopped = 0,
    Starting = 1,
    Running = 2,
    /// Finishing its requests before a recycle or a scale-down.
    Retiring = 3,
    /// Exited; waiting out the restart back-off.
    Dead = 4,
}

/// One application process (or remote address).
#[derive(Debug)]
pub struct Proc {
    pub index: usize,
    pub target: Target,
    /// The target as an HTTP authority (`127.0.0.1:8081`, `localhost` for
    /// a Unix socket): an HTTP upstream's Host when the client's is not
    /// kept, and how its own redirects are recognised. Written once here,
    /// not per request.
    pub authority: String,
    state: AtomicU8,
    busy: AtomicUsize,
    capacity: AtomicUsize,
    pub served: AtomicU64,
    /// Peak-EWMA of response times, in microseconds (0: no sample yet).
    ewma_us: AtomicU64,
    /// Connections refused or requests failed by the process (server).
    pub failures: AtomicU64,
    pub served_total: AtomicU64,
    pub restarts: AtomicU32,
    /// Requests sent again on a fresh connection after a kept-alive one
    /// failed before any response byte (the keep-alive race).
    pub retries: AtomicU64,
    /// Active health checks pass (always true without them).
    healthy: AtomicBool,
    /// Out of rotation until this time (the pool's clock, ms) after a
    /// failure: passive health, as nginx's `max_fails=1 fail_timeout`.
    down_until: AtomicU64,
    pub pid: AtomicI32,
    /// Connections kept alive (FCGI_KEEP_CONN), not registered with any
    /// worker's event loop while they wait here.
    idle: Mutex<Vec<IdleConn>>,
    /// Wakes the supervisor: recycle (max_requests reached) or scale down.
    retire: Notify,
    last_used: AtomicU64,
    values_asked: AtomicBool,
    /// Whether the process answered FCGI_GET_VALUES (or we gave up on it).
    learned: AtomicBool,
    /// Kept-alive connections are safe with it.
    keepalive: AtomicBool,
    /// It multiplexes (FCGI_MPXS_CONNS=1): each worker puts all its
    /// requests for it on one connection (`mux.rs`).
    mpx: AtomicBool,
}

/// A kept-alive connection to an application, still registered with the
/// event loop of the worker that used it last (`owner`): that worker takes
/// it back for nothing; another one moves it into its own event loop first.
pub struct IdleConn {
    pub stream: super::stream::AppStream,
    pub owner: usize,
    /// The application may close it right after its last request (one
    /// that carried a body the application may have left unread): whoever
    /// takes it checks it first.
    pub suspect: bool,
    /// How long it may stay parked when that is shorter than the pool's
    /// `keepalive_timeout` (an HTTP upstream's `Keep-Alive: timeout=N`).
    pub ttl: Option<Duration>,
    /// When it was parked (the pool's clock, ms).
    since: u64,
}

impl IdleConn {
    pub fn new(stream: super::stream::AppStream, owner: usize) -> IdleConn {
        IdleConn {
            stream,
            owner,
            suspect: false,
            ttl: None,
            since: 0,
        }
    }
}

impl std::fmt::Debug for IdleConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IdleConn(worker {})", self.owner)
    }
}

impl Proc {
    fn new(index: usize, target: Target, capacity: usize) -> Proc {
        let authority = match &target {
            Target::Tcp(a) => a.to_string(),
            Target::Unix(_) => "localhost".to_owned(),
        };
        Proc {
            index,
            target,
            authority,
            state: AtomicU8::new(ProcState::Stopped as u8),
            busy: AtomicUsize::new(0),
            capacity: AtomicUsize::new(capacity),
            served: AtomicU64::new(0),
            ewma_us: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            served_total: AtomicU64::new(0),
            restarts: AtomicU32::new(0),
            retries: AtomicU64::new(0),
            healthy: AtomicBool::new(true),
            down_until: AtomicU64::new(0),
            pid: AtomicI32::new(0),
            idle: Mutex::new(Vec::new()),
            retire: Notify::new(),
            last_used: AtomicU64::new(0),
            values_asked: AtomicBool::new(false),
            learned: AtomicBool::new(false),
            keepalive: AtomicBool::new(false),
            mpx: AtomicBool::new(false),
        }
    }

    pub fn state(&self) -> ProcState {
        match self.state.load(Ordering::Acquire) {
            1 => ProcState::Starting,
            2 => ProcState::Running,
            3 => ProcState::Retiring,
            4 => ProcState::Dead,
            _ => ProcState::Stopped,
        }
    }

    pub fn set_state(&self, s: ProcState) {
        self.state.store(s as u8, Ordering::Release);
    }

    pub fn busy(&self) -> usize {
        self.busy.load(Ordering::Acquire)
    }

    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }

    pub fn set_capacity(&self, n: usize) {
        self.capacity.store(n.max(1), Ordering::Relaxed);
    }

    /// Claims one request slot if the process is running and has room.
    fn try_claim(&self, now: u64) -> bool {
        if self.state() != ProcState::Running
            || !self.is_healthy()
            || now < self.down_until.load(Ordering::Relaxed)
        {
            return false;
        }
        let cap = self.capacity();
        self.busy
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                (b < cap).then_some(b + 1)
            })
            .is_ok()
    }

    /// True once per process start: the caller sends FCGI_GET_VALUES ahead
    /// of its request and passes the answer to [`Proc::learn`].
    pub fn ask_values(&self) -> bool {
        !self.values_asked.swap(true, Ordering::Relaxed)
    }

    /// Forgets what an earlier process in this slot said.
    fn reset_values(&self, spec: &PoolSpec) {
        if spec.protocol == Protocol::Http {
            self.speaks_http(spec);
            return;
        }
        self.values_asked.store(false, Ordering::Relaxed);
        self.learned.store(false, Ordering::Relaxed);
        self.keepalive.store(false, Ordering::Relaxed);
        self.mpx.store(false, Ordering::Relaxed);
        // One request at a time until the new process says more (or what
        // the operator stated).
        self.set_capacity(spec.stated_capacity.unwrap_or(1));
    }

    /// Records a response time: a slower one is taken at once (peak), a
    /// faster one moves the estimate a tenth of the way.
    pub fn record_latency(&self, d: Duration) {
        let x = d.as_micros().min(u128::from(u32::MAX)) as u64;
        let _ = self
            .ewma_us
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |e| {
                Some(if e == 0 || x > e { x } else { e - (e - x) / 10 })
            });
    }

    /// The latency estimate, in microseconds.
    pub fn ewma_us(&self) -> u64 {
        self.ewma_us.load(Ordering::Relaxed)
    }

    /// Whether it takes requests: health checks pass and no failure holds
    /// it off (for the status page).
    pub fn in_rotation(&self) -> bool {
        let now = mono_ms();
        self.is_healthy() && now >= self.down_until.load(Ordering::Relaxed)
    }

    /// Whether active health checks (if any) pass.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Health checks changed their verdict; one taken out loses its parked
    /// connections.
    pub fn set_healthy(&self, ok: bool) {
        if self.healthy.swap(ok, Ordering::Relaxed) != ok && !ok {
            self.drop_idle();
        }
    }

    /// An HTTP server says nothing of its concurrency: the operator's
    /// `capacity` (or the pool default) caps requests (and connections)
    /// at once, and connections are kept alive from the start.
    fn speaks_http(&self, spec: &PoolSpec) {
        self.values_asked.store(true, Ordering::Relaxed);
        self.learned.store(true, Ordering::Relaxed);
        self.mpx.store(false, Ordering::Relaxed);
        self.set_capacity(spec.stated_capacity.unwrap_or(spec.default_capacity));
        self.keepalive.store(true, Ordering::Relaxed);
    }

    /// Sizes the process's concurrency to what it said. Without
    /// multiplexing each request has a connection of its own, so both
    /// FCGI_MAX_CONNS and FCGI_MAX_REQS bind; a multiplexing process takes
    /// MAX_REQS requests spread over at most MAX_CONNS connections, and
    /// Stoa opens one per worker (so it multiplexes only when MAX_CONNS
    /// allows one per worker).
    pub fn learn(&self, v: &stoa_fastcgi::Values, spec: &PoolSpec) {
        let mpx = v.mpxs_conns == Some(true)
            && v.max_conns
                .is_none_or(|c| c as usize >= worker_count().max(1));
        let said = match (v.max_conns, v.max_reqs) {
            (_, Some(r)) if mpx => Some(r),
            (Some(c), Some(r)) => Some(c.min(r)),
            (c, r) => c.or(r),
        };
        let n = match (said.map(|n| n as usize), spec.stated_capacity) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(n) = n {
            self.set_capacity(n.clamp(1, 1024));
            self.keepalive.store(true, Ordering::Relaxed);
            self.learned.store(true, Ordering::Relaxed);
            self.mpx.store(mpx && n > 1, Ordering::Relaxed);
        }
        // An answer without either limit (php-fpm 8.2 sends only
        // FCGI_MPXS_CONNS=0) says nothing about concurrency: the request's
        // end then applies the pool default, without keep-alive.
        tracing::debug!("pool {}: process #{} says {v:?}", spec.name, self.index);
    }

    /// Called when a request ends: an application that did not answer
    /// FCGI_GET_VALUES by then gets the pool's default capacity and no
    /// kept-alive connections, since an idle connection could pin one of
    /// its workers (one connection per request, as nginx does by default).
    pub fn values_settled(&self, spec: &PoolSpec) {
        if !self.learned.swap(true, Ordering::Relaxed) {
            self.set_capacity(spec.stated_capacity.unwrap_or(spec.default_capacity));
            self.keepalive
                .store(spec.stated_capacity.is_some(), Ordering::Relaxed);
        }
    }

    /// Whether requests share connections to it.
    pub fn multiplexes(&self) -> bool {
        self.mpx.load(Ordering::Relaxed)
    }

    /// It answered a second request on a connection with CANT_MPX_CONN
    /// (§5.5) though it said it multiplexes: one request per connection
    /// from now on.
    pub fn stop_multiplexing(&self) {
        if self.mpx.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                "process #{}: refused a multiplexed request (CANT_MPX_CONN); no more multiplexing",
                self.index
            );
        }
    }

    /// A kept-alive connection, this worker's own if it has one here.
    pub fn take_idle(&self) -> Option<IdleConn> {
        let me = worker_index();
        let mut v = self.idle.lock().ok()?;
        match v.iter().rposition(|c| c.owner == me) {
            // `remove`, not `swap_remove`: the stash stays in parking
            // order for `expire_idle`.
            Some(i) => Some(v.remove(i)),
            None => v.pop(),
        }
    }

    /// Keeps a connection for the next request. Connections open to a
    /// process (in use plus idle) never exceed what it can serve at once:
    /// an idle one may hold a worker of a process-per-connection server
    /// (php-fpm), and one more would wait in its backlog behind it. The
    /// most recently parked is reused first, so connections beyond what
    /// recent concurrency needs sit untouched until [`Proc::expire_idle`]
    /// closes them.
    fn put_idle(&self, mut c: IdleConn, now: u64) {
        if self.state() != ProcState::Running || !self.keepalive.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(mut v) = self.idle.lock() {
            // `busy` still counts the request this connection just served.
            if v.len() + self.busy() <= self.capacity() {
                c.since = now;
                v.push(c);
            }
        }
    }

    /// Closes connections parked since before `cutoff` (oldest first in
    /// the stash, since reuse takes from the end).
    fn expire_idle(&self, cutoff: u64, now: u64) {
        let old: Vec<IdleConn> = match self.idle.lock() {
            Ok(mut v) => {
                let n = v.iter().take_while(|c| c.since < cutoff).count();
                let mut old: Vec<IdleConn> = v.drain(..n).collect();
                // Those with a shorter life of their own, anywhere.
                let mut i = 0;
                while i < v.len() {
                    let c = &v[i];
                    if c.ttl.is_some_and(|t| c.since + t.as_millis() as u64 <= now) {
                        old.push(v.remove(i));
                    } else {
                        i += 1;
                    }
                }
                old
            }
            Err(_) => return,
        };
        // Closed outside the lock.
        drop(old);
    }

    /// A kept-alive connection failed before any response byte: the
    /// request goes again on a fresh one; the other parked connections
    /// are likely as stale (the process restarted or recycled).
    pub fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
        self.drop_idle();
    }

    /// Kept-alive connections parked for reuse.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().map_or(0, |v| v.len())
    }

    fn drop_idle(&self) {
        if let Ok(mut v) = self.idle.lock() {
            v.clear();
        }
    }
}

/// Requests of one worker thread waiting for a slot, oldest first.
#[derive(Debug, Default)]
struct WaitQueue {
    notify: Notify,
    /// (ticket, arrival) of each waiter.
    waiters: Mutex<std::collections::VecDeque<(u64, Instant)>>,
}

impl WaitQueue {
    fn push(&self, ticket: u64) {
        if let Ok(mut w) = self.waiters.lock() {
            w.push_back((ticket, Instant::now()));
        }
    }

    fn remove(&self, ticket: u64) {
        if let Ok(mut w) = self.waiters.lock() {
            // Usually the front: waiters are woken in order.
            if let Some(i) = w.iter().position(|&(t, _)| t == ticket) {
                w.remove(i);
            }
        }
    }

    fn is_front(&self, ticket: u64) -> bool {
        self.waiters
            .lock()
            .is_ok_and(|w| w.front().is_some_and(|&(t, _)| t == ticket))
    }

    /// When the longest waiter here arrived.
    fn oldest(&self) -> Option<Instant> {
        self.waiters.lock().ok()?.front().map(|&(_, at)| at)
    }
}

/// How much longer than the local one a waiter on another worker thread
/// may wait before a freed slot crosses threads to it.
const FAIRNESS: Duration = Duration::from_millis(1);

/// One wait queue per worker thread there can be.
fn wait_queues() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 256)
}

/// A claimed request slot on a process; dropping it frees the slot and
/// wakes a waiting request.
pub struct Lease {
    pub proc: Arc<Proc>,
    pool: Arc<Pool>,
}

impl Lease {
    /// Counts a completed request; at `max_requests` the process is
    /// recycled once its requests are done.
    pub fn served(&self) {
        let n = self.proc.served.fetch_add(1, Ordering::Relaxed) + 1;
        self.proc.served_total.fetch_add(1, Ordering::Relaxed);
        let max = self.pool.spec.max_requests;
        if max > 0 && n >= max && matches!(self.pool.spec.kind, PoolKind::Spawn { .. }) {
            self.proc.set_state(ProcState::Retiring);
            self.proc.drop_idle();
            self.proc.retire.notify_one();
        }
    }

    /// The process refused the connection: its kept-alive connections are
    /// stale too. (A spawned process that died is seen to by its
    /// supervisor; a remote address stays in rotation.)
    pub fn failed(&self) {
        self.proc.failures.fetch_add(1, Ordering::Relaxed);
        self.proc.drop_idle();
    }

    /// The server failed (refused a connection, died mid-request): out of
    /// rotation for `d` when the pool has another to offer.
    pub fn hold_off(&self, d: Duration) {
        self.proc.failures.fetch_add(1, Ordering::Relaxed);
        self.proc.drop_idle();
        if self.pool.procs.len() > 1 {
            let until = mono_ms() + d.as_millis() as u64;
            self.proc.down_until.store(until, Ordering::Relaxed);
        }
    }

    /// Parks a connection that ended its request cleanly for the next one.
    pub fn park(&self, c: IdleConn) {
        self.proc.put_idle(c, self.pool.clock());
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.proc.busy.fetch_sub(1, Ordering::AcqRel);
        self.proc
            .last_used
            .store(self.pool.clock(), Ordering::Relaxed);
        if self.proc.state() == ProcState::Retiring && self.proc.busy() == 0 {
            self.proc.retire.notify_one();
        }
        self.pool.wake();
    }
}

/// Why no process could be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoProcess {
    /// The queue was full (503 at once).
    QueueFull,
    /// Waited `queue_timeout` (503).
    Timeout,
    /// The pool was stopped (removed by a reload) and nothing replaced it.
    Stopped,
}

/// A pool at run time.
#[derive(Debug)]
pub struct Pool {
    pub spec: PoolSpec,
    pub procs: Vec<Arc<Proc>>,
    /// Requests waiting for a slot, one queue per worker thread (see
    /// [`Pool::wake`]).
    queues: Vec<WaitQueue>,
    tickets: AtomicU64,
    waiting: AtomicUsize,
    rr: AtomicUsize,
    pub(super) stopping: AtomicBool,
    /// The pool a reload started in this one's place: leases go there once
    /// this one stops, so a request routed by the configuration before
    /// the reload never waits on a pool that will not serve it again.
    successor: std::sync::OnceLock<Arc<Pool>>,
    epoch: Instant,
    /// Listening sockets of spawned slots (fd 0 of their processes).
    listeners: Mutex<Vec<Option<OwnedFd>>>,
    rundir: Option<PathBuf>,
    /// Affinity keys a process gave out itself (the session cookie of an
    /// HTTP pool's `affinity = "cookie:NAME"`, seen in `Set-Cookie`): they
    /// go back to that process, not to the one hashing would pick, which
    /// does not know the session (HAProxy's `stick store-response`). At
    /// most [`LEARNED_MAX`].
    learned: Mutex<HashMap<Vec<u8>, usize>>,
}

/// Learned affinity keys kept per pool; past it an arbitrary one is
/// forgotten (its requests are then hashed).
const LEARNED_MAX: usize = 65536;

impl Pool {
    /// A pool whose spawned processes listen in `rundir`, on sockets named
    /// for its `generation`: a pool a reload starts in place of another
    /// (same name) gets a new one, so the two never share a socket.
    pub fn new(spec: PoolSpec, rundir: Option<PathBuf>, generation: u64) -> Pool {
        let procs: Vec<Arc<Proc>> = match &spec.kind {
            PoolKind::Spawn { max, .. } => (0..*max)
                .map(|i| {
                    let dir = rundir.clone().unwrap_or_default();
                    let sock = dir.join(socket_name(&spec.name, generation, i));
                    let cap = spec.stated_capacity.unwrap_or(spec.default_capacity);
                    let p = Proc::new(i, Target::Unix(sock), cap);
                    if spec.protocol == Protocol::Http {
                        p.speaks_http(&spec);
                    }
                    Arc::new(p)
                })
                .collect(),
            PoolKind::Remote { addresses } => addresses
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    // One request at a time until the server says (or fails
                    // to say) how many it takes.
                    let p = Proc::new(i, t.clone(), spec.stated_capacity.unwrap_or(1));
                    if spec.protocol == Protocol::Http {
                        p.speaks_http(&spec);
                    }
                    p.set_state(ProcState::Running);
                    Arc::new(p)
                })
                .collect(),
        };
        let n = procs.len();
        Pool {
            spec,
            procs,
            queues: (0..wait_queues()).map(|_| WaitQueue::default()).collect(),
            tickets: AtomicU64::new(0),
            waiting: AtomicUsize::new(0),
            rr: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            successor: std::sync::OnceLock::new(),
            epoch: Instant::now(),
            listeners: Mutex::new((0..n).map(|_| None).collect()),
            rundir,
            learned: Mutex::new(HashMap::new()),
        }
    }

    fn clock(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Claims a process for a request with affinity key `key` (if any),
    /// waiting in the bounded queue when all are busy. `skip` excludes a
    /// process that just refused the request.
    pub async fn lease(
        self: &Arc<Self>,
        key: Option<&[u8]>,
        skip: Option<usize>,
    ) -> Result<Lease, NoProcess> {
        if self.is_stopping() {
            return self.lease_successor(key).await;
        }
        // First come, first served: while others wait, a new request
        // queues behind them instead of taking the next free slot.
        if self.waiting() == 0 {
            if let Some(l) = self.try_lease(key, skip) {
                return Ok(l);
            }
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.spec.queue {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(NoProcess::QueueFull);
        }
        let queue = &self.queues[worker_index() % self.queues.len()];
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        queue.push(ticket);
        let deadline = tokio::time::Instant::now() + self.spec.queue_timeout;
        // A slot free right now is promised to the waiter woken for it: try
        // only once woken (or on the tick), or when first in line (a slot
        // freed before this request joined the queue woke nobody). Taking
        // it otherwise would send that waiter to the back of the queue.
        let mut woken = false;
        let r = loop {
            let notified = queue.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if woken || queue.is_front(ticket) {
                if let Some(l) = self.try_lease(key, skip) {
                    break Ok(l);
                }
            }
            woken = true;
            if self.is_stopping() {
                // Stopped meanwhile ([`stop`] wakes every waiter): no slot
                // of this pool will be free again.
                break Err(NoProcess::Stopped);
            }
            // Also poll now and then: a process that (re)starts does not
            // free a slot, so nobody would notify.
            let tick = tokio::time::Instant::now() + Duration::from_millis(100);
            if tokio::time::timeout_at(deadline.min(tick), notified)
                .await
                .is_err()
                && tokio::time::Instant::now() >= deadline
            {
                break self.try_lease(key, skip).ok_or(NoProcess::Timeout);
            }
        };
        queue.remove(ticket);
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        match r {
            Err(NoProcess::Stopped) => self.lease_successor(key).await,
            r => r,
        }
    }

    /// Whether the pool is stopping (a reload replaced or removed it, or
    /// the server stops): it takes no new request.
    fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// A lease on the pool that replaced this stopped one (its newest
    /// generation), or `Stopped` at once when the pool was removed.
    /// Process indices are the old pool's, so no `skip` goes along.
    async fn lease_successor(&self, key: Option<&[u8]>) -> Result<Lease, NoProcess> {
        let mut next = self.successor.get().ok_or(NoProcess::Stopped)?;
        while next.is_stopping() {
            next = next.successor.get().ok_or(NoProcess::Stopped)?;
        }
        // Boxed: a future cannot contain itself.
        Box::pin(next.lease(key, None)).await
    }

    /// A slot was freed (or a process started). Without affinity any waiter
    /// can use it: wake one, not all. Each worker thread has its own FIFO
    /// queue, and a slot freed here goes to a waiter on this thread (no
    /// cross-thread wake-up, which costs a context switch and leaves the
    /// process idle meanwhile) unless a waiter elsewhere has waited
    /// [`FAIRNESS`] longer than the longest one here: then the longest
    /// waiter of all gets it. With affinity a waiter may need one process in
    /// particular, so all look.
    fn wake(&self) {
        if self.spec.affinity != Affinity::None {
            self.wake_all();
            return;
        }
        let here = worker_index() % self.queues.len();
        let mut oldest: Option<(usize, Instant)> = None;
        for (i, q) in self.queues.iter().enumerate() {
            if let Some(at) = q.oldest() {
                if oldest.is_none_or(|(_, o)| at < o) {
                    oldest = Some((i, at));
                }
            }
        }
        let Some((first, first_at)) = oldest else {
            return;
        };
        let target = match self.queues[here].oldest() {
            Some(at) if at <= first_at + FAIRNESS => here,
            _ => first,
        };
        self.queues[target].notify.notify_one();
    }

    fn wake_all(&self) {
        for q in &self.queues {
            q.notify.notify_waiters();
        }
    }

    fn try_lease(self: &Arc<Self>, key: Option<&[u8]>, skip: Option<usize>) -> Option<Lease> {
        let now = mono_ms();
        // Running, passing its health checks, not held off after a
        // failure: an affinity key whose process is out falls to the
        // next-best one instead of waiting for it.
        let usable = |p: &Arc<Proc>| {
            Some(p.index) != skip
                && p.state() == ProcState::Running
                && p.is_healthy()
                && now >= p.down_until.load(Ordering::Relaxed)
        };
        let lease = |p: &Arc<Proc>| Lease {
            proc: p.clone(),
            pool: self.clone(),
        };
        if let Some(key) = key {
            // A key its process gave out goes back to it.
            let owner = self.learned.lock().ok().and_then(|m| m.get(key).copied());
            if let Some(p) = owner.and_then(|i| self.procs.get(i)).filter(|p| usable(p)) {
                return p.try_claim(now).then(|| lease(p));
            }
            // Rendezvous hashing: the running process with the highest score
            // for this key. A process added or lost moves only its own keys.
            let best = self
                .procs
                .iter()
                .filter(|p| usable(p))
                .max_by_key(|p| score(key, p.index))?;
            return best.try_claim(now).then(|| lease(best));
        }
        let n = self.procs.len();
        let start = self.rr.fetch_add(1, Ordering::Relaxed);
        match self.spec.balance {
            Balance::P2cEwma => {
                // Two distinct candidates from a cheap hash of the counter
                // (no RNG on the request path); unknown latency counts as
                // the best known, so a new server gets tried.
                let a = (start.wrapping_mul(0x9E37_79B9)) % n;
                let b = if n > 1 {
                    (a + 1 + (start >> 7) % (n - 1)) % n
                } else {
                    a
                };
                let cost = |p: &Arc<Proc>| (p.ewma_us().max(1)) * (p.busy() as u64 + 1);
                let mut order = [a, b];
                if cost(&self.procs[b]) < cost(&self.procs[a]) {
                    order = [b, a];
                }
                order
                    .iter()
                    .map(|&j| &self.procs[j])
                    .chain((0..n).map(|i| &self.procs[(start + i) % n]))
                    .find(|p| usable(p) && p.try_claim(now))
                    .map(lease)
            }
            Balance::RoundRobin => (0..n)
                .map(|i| &self.procs[(start + i) % n])
                .find(|p| usable(p) && p.try_claim(now))
                .map(lease),
            Balance::LeastBusy => {
                // Fewest requests in flight relative to capacity; ties go
                // round-robin so equal processes share the load. A scan,
                // not a sort: this runs for every request.
                let mut tried = vec![false; 0];
                let mut tried_bits = 0u64;
                let was_tried = |tried: &[bool], bits: u64, j: usize| {
                    if n <= 64 {
                        bits & (1 << j) != 0
                    } else {
                        tried.get(j).copied().unwrap_or(false)
                    }
                };
                if n > 64 {
                    tried = vec![false; n];
                }
                loop {
                    let mut best: Option<(usize, usize)> = None;
                    for i in 0..n {
                        let j = (start + i) % n;
                        let p = &self.procs[j];
                        if was_tried(&tried, tried_bits, j) || !usable(p) {
                            continue;
                        }
                        let load = p.busy() * 1000 / p.capacity().max(1);
                        if best.is_none_or(|(l, _)| load < l) {
                            best = Some((load, j));
                        }
                    }
                    let (_, j) = best?;
                    if self.procs[j].try_claim(now) {
                        return Some(lease(&self.procs[j]));
                    }
                    if n <= 64 {
                        tried_bits |= 1 << j;
                    } else {
                        tried[j] = true;
                    }
                }
            }
        }
    }

    /// Process `index` gave out affinity key `key` (a session cookie it
    /// set): later requests with it go to that process while it is usable.
    pub fn learn(&self, key: &[u8], index: usize) {
        let Ok(mut m) = self.learned.lock() else {
            return;
        };
        if m.len() >= LEARNED_MAX && !m.contains_key(key) {
            if let Some(k) = m.keys().next().cloned() {
                m.remove(&k);
            }
        }
        m.insert(key.to_vec(), index);
    }

    /// One line per process, for SIGUSR1 and the logs.
    pub fn status(&self) -> String {
        let mut s = format!("pool {}: waiting {}", self.spec.name, self.waiting());
        for p in &self.procs {
            if p.state() == ProcState::Stopped && matches!(self.spec.kind, PoolKind::Spawn { .. }) {
                continue;
            }
            // An address pool's processes are not Stoa's: no pid to give.
            let who = match self.spec.kind {
                PoolKind::Spawn { .. } => format!("pid {}", p.pid.load(Ordering::Relaxed)),
                _ => format!("address {}", p.target),
            };
            s.push_str(&format!(
                "; #{} {:?} {who} busy {}/{} served {} restarts {}",
                p.index,
                p.state(),
                p.busy(),
                p.capacity(),
                p.served_total.load(Ordering::Relaxed),
                p.restarts.load(Ordering::Relaxed)
            ));
        }
        s
    }
}

fn score(key: &[u8], index: usize) -> u64 {
    let mut h = DefaultHasher::new();
    key.hash(&mut h);
    index.hash(&mut h);
    h.finish()
}

/// `NAME.GEN-SLOT.sock`: a pool name has no '.', so no two pools, and no two
/// generations of one, can share a socket.
fn socket_name(pool: &str, generation: u64, slot: usize) -> String {
    format!("{pool}.{generation}-{slot}.sock")
}

/// Replaces `old` by `new` (a reload changed its configuration): requests
/// still routed to `old` go to `new` from now on, and `old` drains in the
/// background (see [`stop`]).
pub(crate) fn retire(old: Arc<Pool>, new: &Arc<Pool>) {
    let _ = old.successor.set(new.clone());
    tokio::task::spawn_local(async move { stop(&old).await });
}

/// Spawns and supervises a pool's processes until it is stopped.
pub fn start(pool: &Arc<Pool>) {
    tokio::task::spawn_local(expire_idle(pool.clone()));
    if pool.spec.health.is_some() {
        tokio::task::spawn_local(super::health::watch(pool.clone()));
    }
    let PoolKind::Spawn { min, .. } = &pool.spec.kind else {
        return;
    };
    for i in 0..*min {
        tokio::task::spawn_local(supervise(pool.clone(), i));
    }
    tokio::task::spawn_local(scale(pool.clone()));
}

/// Closes kept-alive connections parked longer than `keepalive_timeout`,
/// whether or not requests come (php-fpm's other clients need its children
/// back while Stoa is idle).
async fn expire_idle(pool: Arc<Pool>) {
    let timeout = pool.spec.keepalive_timeout;
    let mut tick = tokio::time::interval((timeout / 4).max(Duration::from_millis(50)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if pool.stopping.load(Ordering::Acquire) {
            return;
        }
        let now = pool.clock();
        let cutoff = now.saturating_sub(timeout.as_millis() as u64);
        for p in &pool.procs {
            p.expire_idle(cutoff, now);
        }
    }
}

/// Grows a dynamic pool while requests queue, shrinks it when idle.
async fn scale(pool: Arc<Pool>) {
    let PoolKind::Spawn {
        min,
        max,
        idle_timeout,
        ..
    } = pool.spec.kind.clone()
    else {
        return;
    };
    if min == max {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tick.tick().await;
        if pool.stopping.load(Ordering::Acquire) {
            return;
        }
        let live: Vec<&Arc<Proc>> = pool
            .procs
            .iter()
            .filter(|p| p.state() != ProcState::Stopped)
            .collect();
        if pool.waiting() > 0 && live.len() < max {
            if let Some(p) = pool.procs.iter().find(|p| p.state() == ProcState::Stopped) {
                tracing::info!(
                    "pool {}: {} waiting, starting process #{}",
                    pool.spec.name,
                    pool.waiting(),
                    p.index
                );
                p.set_state(ProcState::Starting);
                tokio::task::spawn_local(supervise(pool.clone(), p.index));
            }
        } else if pool.waiting() == 0 && live.len() > min {
            let now = pool.clock();
            let idle_ms = idle_timeout.as_millis() as u64;
            if let Some(p) = live.iter().rev().find(|p| {
                p.state() == ProcState::Running
                    && p.busy() == 0
                    && now.saturating_sub(p.last_used.load(Ordering::Relaxed)) > idle_ms
            }) {
                tracing::info!(
                    "pool {}: process #{} idle, stopping it",
                    pool.spec.name,
                    p.index
                );
                p.set_state(ProcState::Retiring);
                p.retire.notify_one();
            }
        }
    }
}

/// Runs one process slot: spawn, watch, restart with back-off, recycle.
async fn supervise(pool: Arc<Pool>, index: usize) {
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

/// Builds a pool spec from its config table.
#[allow(clippy::too_many_arguments)]
pub fn spec(
    name: &str,
    command: Option<Vec<String>>,
    address: Option<Vec<String>>,
    processes: Option<usize>,
    min_processes: Option<usize>,
    max_processes: Option<usize>,
    max_requests: Option<u64>,
    affinity: Option<&str>,
    balance: Option<&str>,
    queue: Option<usize>,
    queue_timeout: Option<Duration>,
    timeout: Option<Duration>,
    env: Vec<(String, String)>,
    idle_timeout: Option<Duration>,
    capacity: Option<usize>,
    keepalive_timeout: Option<Duration>,
    user: Option<crate::privileges::Account>,
    base: &Path,
) -> Result<PoolSpec, String> {
    if capacity.is_some_and(|c| c == 0 || c > 1024) {
        return Err("`capacity` must be 1..=1024".into());
    }
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "pool name `{name}`: use letters, digits, '-' and '_'"
        ));
    }
    let kind = match (command, address) {
        (Some(cmd), None) => {
            if cmd.is_empty() {
                return Err("`command` is empty".into());
            }
            let mut cmd = cmd;
            let prog = Path::new(&cmd[0]);
            if prog.components().count() > 1 && !prog.is_absolute() {
                cmd[0] = base.join(prog).display().to_string();
            }
            let (min, max) = match (processes, min_processes, max_processes) {
                (Some(n), None, None) => (n, n),
                (None, min, Some(max)) => (min.unwrap_or(1), max),
                (None, None, None) => (1, 1),
                _ => return Err("give `processes`, or `min_processes` and `max_processes`".into()),
            };
            if max == 0 || min > max || max > 1024 {
                return Err(format!(
                    "processes {min}..{max}: need 1 <= max <= 1024 and min <= max"
                ));
            }
            PoolKind::Spawn {
                command: cmd,
                cwd: base.to_path_buf(),
                env,
                min,
                max,
                idle_timeout: idle_timeout.unwrap_or(Duration::from_secs(10)),
                user,
            }
        }
        (None, Some(addrs)) => {
            if user.is_some() {
                return Err("`user` is for spawned pools (`command`)".into());
            }
            if addrs.is_empty() {
                return Err("`address` is empty".into());
            }
            let addresses = addrs
                .iter()
                .map(|a| Target::parse(a, base))
                .collect::<Result<Vec<_>, _>>()?;
            PoolKind::Remote { addresses }
        }
        _ => return Err("give exactly one of `command` or `address`".into()),
    };
    let remote = matches!(kind, PoolKind::Remote { .. });
    Ok(PoolSpec {
        name: name.to_owned(),
        kind,
        max_requests: max_requests.unwrap_or(0),
        affinity: Affinity::parse(affinity.unwrap_or("none"))?,
        balance: match balance.unwrap_or("least-busy") {
            "least-busy" => Balance::LeastBusy,
            "round-robin" => Balance::RoundRobin,
            "p2c-ewma" => Balance::P2cEwma,
            other => {
                return Err(format!(
                    "balance `{other}`: \"least-busy\", \"round-robin\" or \"p2c-ewma\""
                ))
            }
        },
        queue: queue.unwrap_or(1024),
        queue_timeout: queue_timeout.unwrap_or(Duration::from_secs(10)),
        timeout: timeout.unwrap_or(Duration::from_secs(60)),
        // An external pool (php-fpm) usually runs several workers behind
        // one address; a spawned process is assumed single-threaded.
        default_capacity: if remote { 16 } else { 1 },
        stated_capacity: capacity,
        keepalive_timeout: keepalive_timeout.unwrap_or(Duration::from_secs(2)),
        protocol: Protocol::FastCgi,
        health: None,
        socket_activation: false,
    })
}

/// Accepts `127.0.0.1:8080`, `[::1]:8080`, `localhost:8080` and `:8080`
/// (all IPv4 interfaces).
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Some(port) = s.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| format!("`{s}`: bad port"))?;
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    if let Some(port) = s.strip_prefix("localhost:") {
        let port: u16 = port.parse().map_err(|_| format!("`{s}`: bad port"))?;
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    Err(format!(
        "`{s}` is not an address (write e.g. \"127.0.0.1:8080\" or \"[::1]:8080\")"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;

    #[test]
    fn affinity_specs_parse() {
        assert_eq!(
            Affinity::parse("cookie:SESSIONID"),
            Ok(Affinity::Cookie("SESSIONID".into()))
        );
        assert_eq!(
            Affinity::parse("header:X-User"),
            Ok(Affinity::Header("X-User".into()))
        );
        assert_eq!(
            Affinity::parse("query:user"),
            Ok(Affinity::Query("user".into()))
        );
        assert_eq!(Affinity::parse("client-ip"), Ok(Affinity::ClientIp));
        assert_eq!(Affinity::parse("none"), Ok(Affinity::None));
        assert!(Affinity::parse("cookie:").is_err());
        assert!(Affinity::parse("sticky").is_err());
    }

    fn one_slot_pool() -> Arc<Pool> {
        let spec = spec(
            "t",
            None,
            Some(vec!["127.0.0.1:9".into()]),
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            Vec::new(),
            None,
            Some(1),
            None,
            None,
            Path::new("."),
        )
        .expect("spec");
        Arc::new(Pool::new(spec, None, 0))
    }

    #[test]
    fn a_freed_slot_goes_to_the_longest_waiter_not_to_a_request_arriving_meanwhile() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let pool = one_slot_pool();
            let held = pool.lease(None, None).await.expect("first lease");
            let order = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            let mut tasks = Vec::new();
            for name in ["a", "b", "c"] {
                let (pool, order) = (pool.clone(), order.clone());
                tasks.push(tokio::task::spawn_local(async move {
                    let l = pool.lease(None, None).await.expect("lease");
                    order.borrow_mut().push(name);
                    tokio::task::yield_now().await;
                    drop(l);
                }));
                // Let it join the queue before the next one comes.
                tokio::task::yield_now().await;
            }
            assert_eq!(pool.waiting(), 3);
            // The slot is freed and "a" woken; before "a" runs, a new
            // request arrives: it must queue, not take the slot.
            drop(held);
            let late = pool.lease(None, None);
            tokio::pin!(late);
            let first = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(late.as_mut().poll(cx).is_ready())
            })
            .await;
            assert!(!first, "a request arriving meanwhile took the slot");
            let l = late.await.expect("late lease");
            order.borrow_mut().push("late");
            drop(l);
            for t in tasks {
                t.await.expect("task");
            }
            assert_eq!(*order.borrow(), ["a", "b", "c", "late"]);
        });
    }

    fn local(f: impl std::future::Future<Output = ()>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        tokio::task::LocalSet::new().block_on(&rt, f);
    }

    /// As nginx's old workers after a reload, a replaced pool takes no new
    /// request: a lease on it goes to the pool that replaced it, at once.
    #[test]
    fn a_lease_on_a_replaced_pool_goes_to_its_successor_at_once() {
        local(async {
            let old = one_slot_pool();
            let new = one_slot_pool();
            retire(old.clone(), &new);
            // `retire` stops the old pool in a task of its own.
            while !old.is_stopping() {
                tokio::task::yield_now().await;
            }
            let l = old.lease(None, None).await.expect("lease");
            assert!(Arc::ptr_eq(&l.pool, &new));
            // Two reloads in a row: the newest generation serves.
            drop(l);
            let newest = one_slot_pool();
            retire(new.clone(), &newest);
            while !new.is_stopping() {
                tokio::task::yield_now().await;
            }
            let l = old.lease(None, None).await.expect("lease");
            assert!(Arc::ptr_eq(&l.pool, &newest));
        });
    }

    /// A request already waiting in a pool's queue when a reload replaces
    /// the pool moves to the new one as the old one stops, instead of
    /// waiting `queue_timeout` on a pool that will not serve it.
    #[test]
    fn a_request_waiting_in_a_replaced_pool_moves_to_its_successor_without_waiting_out_the_queue() {
        local(async {
            let old = one_slot_pool();
            let held = old.lease(None, None).await.expect("first lease");
            let waiter = {
                let old = old.clone();
                tokio::task::spawn_local(async move {
                    old.lease(None, None).await.map(|l| l.pool.clone())
                })
            };
            while old.waiting() == 0 {
                tokio::task::yield_now().await;
            }
            let new = one_slot_pool();
            let t = tokio::time::Instant::now();
            retire(old.clone(), &new);
            let got = waiter.await.expect("task").expect("lease");
            assert!(Arc::ptr_eq(&got, &new));
            assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
            // The request in flight on the old pool keeps its lease.
            assert_eq!(held.proc.busy(), 1);
        });
    }

    /// A pool a reload removed answers a lease at once (the caller's 503),
    /// not after `queue_timeout`.
    #[test]
    fn a_lease_on_a_removed_pool_fails_at_once() {
        local(async {
            let old = one_slot_pool();
            stop(&old).await;
            let t = tokio::time::Instant::now();
            assert_eq!(old.lease(None, None).await.err(), Some(NoProcess::Stopped));
            assert!(t.elapsed() < Duration::from_secs(1));
        });
    }

    #[test]
    fn generations_of_a_pool_never_share_a_socket_name() {
        let names: std::collections::BTreeSet<String> = [("a", 1, 0), ("a", 2, 0), ("a", 1, 1)]
            .iter()
            .map(|&(p, g, i)| socket_name(p, g, i))
            .collect();
        assert_eq!(names.len(), 3);
        // A pool name has no '.', so no other pool's name can end in one.
        assert_eq!(socket_name("app", 12, 3), "app.12-3.sock");
    }

    #[test]
    fn rendezvous_moves_only_the_keys_of_a_lost_process() {
        let keys: Vec<String> = (0..2000).map(|i| format!("user{i}")).collect();
        let best = |k: &str, procs: &[usize]| {
            *procs
                .iter()
                .max_by_key(|&&i| score(k.as_bytes(), i))
                .unwrap()
        };
        let all = [0, 1, 2, 3];
        let without2 = [0, 1, 3];
        let mut moved = 0;
        let mut counts = [0usize; 4];
        for k in &keys {
            let a = best(k, &all);
            counts[a] += 1;
            let b = best(k, &without2);
            if a != 2 {
                assert_eq!(a, b, "key {k} moved though its process stayed");
            } else {
                moved += 1;
            }
        }
        assert_eq!(moved, counts[2]);
        for c in counts {
            assert!(c > 350 && c < 650, "uneven spread {counts:?}");
        }
    }
}
