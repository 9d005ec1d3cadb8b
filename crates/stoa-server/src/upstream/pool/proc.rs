//! One application process (or remote address) of a pool: its slots, its
//! state, its health and latency, and what it said it can take.

use super::spec::{PoolSpec, Protocol};
use crate::upstream::stream::IdleConn;
use crate::upstream::target::Target;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Milliseconds on a process-wide monotonic clock (for `down_until`,
/// which outlives any one pool's clock).
pub(super) fn mono_ms() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
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
    pub(super) state: AtomicU8,
    pub(super) busy: AtomicUsize,
    pub(super) capacity: AtomicUsize,
    pub served: AtomicU64,
    /// Peak-EWMA of response times, in microseconds (0: no sample yet).
    pub(super) ewma_us: AtomicU64,
    /// Connections refused or requests failed by the process (server).
    pub failures: AtomicU64,
    pub served_total: AtomicU64,
    pub restarts: AtomicU32,
    /// Requests sent again on a fresh connection after a kept-alive one
    /// failed before any response byte (the keep-alive race).
    pub retries: AtomicU64,
    /// Active health checks pass (always true without them).
    pub(super) healthy: AtomicBool,
    /// Out of rotation until this time (the pool's clock, ms) after a
    /// failure: passive health, as nginx's `max_fails=1 fail_timeout`.
    pub(super) down_until: AtomicU64,
    pub pid: AtomicI32,
    /// Connections kept alive (FCGI_KEEP_CONN), not registered with any
    /// worker's event loop while they wait here.
    pub(super) idle: Mutex<Vec<IdleConn>>,
    /// Wakes the supervisor: recycle (max_requests reached) or scale down.
    pub(super) retire: Notify,
    pub(super) last_used: AtomicU64,
    pub(super) values_asked: AtomicBool,
    /// Whether the process answered FCGI_GET_VALUES (or we gave up on it).
    pub(super) learned: AtomicBool,
    /// Kept-alive connections are safe with it.
    pub(super) keepalive: AtomicBool,
    /// It multiplexes (FCGI_MPXS_CONNS=1): each worker puts all its
    /// requests for it on one connection (`mux.rs`).
    pub(super) mpx: AtomicBool,
}

impl Proc {
    pub(super) fn new(index: usize, target: Target, capacity: usize) -> Proc {
        let authority = match &target {
            Target::Tcp(a) => a.to_string(),
            Target::Unix(_) => "localhost".to_owned(),
            Target::Tls(t) => t.authority.clone(),
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
    pub(super) fn try_claim(&self, now: u64) -> bool {
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
    /// of its request and passes the answer to [`Proc::settle`].
    pub fn ask_values(&self) -> bool {
        !self.values_asked.swap(true, Ordering::Relaxed)
    }

    /// Forgets what an earlier process in this slot said.
    pub(super) fn reset_values(&self, spec: &PoolSpec) {
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
    pub(super) fn speaks_http(&self, spec: &PoolSpec) {
        self.values_asked.store(true, Ordering::Relaxed);
        self.learned.store(true, Ordering::Relaxed);
        self.mpx.store(false, Ordering::Relaxed);
        self.set_capacity(spec.stated_capacity.unwrap_or(spec.default_capacity));
        self.keepalive.store(true, Ordering::Relaxed);
    }

    /// The process said (or its protocol learned) how many requests it
    /// takes at once and whether they share connections: its capacity is
    /// set, and kept-alive connections are safe with it.
    pub fn settle(&self, capacity: usize, multiplexes: bool) {
        self.set_capacity(capacity.clamp(1, 1024));
        self.keepalive.store(true, Ordering::Relaxed);
        self.learned.store(true, Ordering::Relaxed);
        self.mpx.store(multiplexes, Ordering::Relaxed);
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
}
