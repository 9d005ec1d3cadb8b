//! Application pools: the processes Stoa spawns (or the remote addresses
//! it is given) and the choice of one for each request. Protocol-free:
//! what a process speaks is its handler's business.
//!
//! A pool lives across reloads; workers reach it through `Runtime::pools`.
//! Its state is a few atomics and one short mutex per process (the stash of
//! kept-alive connections), so any worker can route to any process.
//!
//! One job per file:
//! - `spec`: the pool as configured ([`PoolSpec`], built from its table by
//!   [`SpecTable`]);
//! - `proc`: one process's state (slots, health, latency, capacity);
//! - `stash`: the kept-alive connections parked with a process, and their
//!   expiry;
//! - `queue`: the per-worker wait queues of requests for a slot;
//! - `supervise`: spawning, watching, restarting and stopping processes;
//! - `scale`: growing and shrinking a dynamic pool;
//! - here: the pool, its leases and the choice of a process.
//!
//! A reload that changes a pool starts a new generation beside the old one
//! (`NAME.GEN-SLOT.sock`: the two never share a socket), points the old one
//! at it ([`retire`]) and drains the old one: its requests in flight finish,
//! new leases go to the successor, and it removes only its own sockets.

mod proc;
mod queue;
mod scale;
mod spec;
mod stash;
mod supervise;

pub use crate::upstream::stream::IdleConn;
pub use crate::upstream::target::{parse_addr, Target};
pub use proc::{Proc, ProcState};
pub(crate) use spec::SpecTable;
pub use spec::{Affinity, Balance, Health, PoolKind, PoolSpec, Protocol};
pub use supervise::stop;

use crate::local::worker_index;
use proc::mono_ms;
use queue::{wait_queues, WaitQueue, ANY, FAIRNESS};
use scale::scale;
use stash::expire_idle;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use supervise::{socket_name, supervise};

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

    /// The server failed (refused a connection, died mid-request): out of
    /// rotation for `d` when the pool has another to offer.
    pub fn hold_off(&self, d: Duration) {
        self.pool.hold_off(&self.proc, d);
    }

    /// A parked connection to this lease's server whose parked life has
    /// not ended: those past it (the pool's `keepalive_timeout`, or a
    /// shorter one the server announced, less a margin) are closed here,
    /// not only by the periodic sweep, which may run long after.
    pub fn take_idle(&self) -> Option<IdleConn> {
        let own = self.pool.spec.keepalive_timeout.as_millis() as u64;
        // The clock only when there is a connection to judge.
        let mut now = None;
        while let Some(c) = self.proc.take_idle() {
            let life = c.ttl.map_or(own, |t| (t.as_millis() as u64).min(own));
            if *now.get_or_insert_with(|| self.pool.clock()) < c.since + life {
                return Some(c);
            }
        }
        None
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
        self.pool.wake(self.proc.index);
    }
}

/// A request's place in a pool's wait queue (see [`Pool::lease`]).
struct Place<'a> {
    pool: &'a Pool,
    queue: &'a WaitQueue,
    ticket: u64,
    /// The process whose slot it waits for, or [`ANY`].
    want: usize,
    leased: bool,
}

impl Place<'_> {
    /// Its key now maps to process `want` (or to any). True when that
    /// changed.
    fn wait_for(&mut self, want: usize) -> bool {
        if want == self.want {
            return false;
        }
        self.pool.wanting(self.want).fetch_sub(1, Ordering::AcqRel);
        self.pool.wanting(want).fetch_add(1, Ordering::AcqRel);
        // Pairs with the fence in `wake`, as when joining the queue.
        std::sync::atomic::fence(Ordering::SeqCst);
        self.queue.set_want(self.ticket, want);
        self.want = want;
        true
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let unused = self.queue.remove(self.ticket, self.leased);
        self.pool.wanting(self.want).fetch_sub(1, Ordering::AcqRel);
        self.pool.waiting.fetch_sub(1, Ordering::AcqRel);
        if unused > 0 && self.pool.spec.affinity != Affinity::None {
            // Which processes those slots were on is not kept (a rare
            // case: the waiter timed out or left while signalled).
            self.pool.wake_all();
            return;
        }
        for _ in 0..unused {
            self.pool.wake(ANY);
        }
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
    /// Of those, how many wait for each process (by index), and last how
    /// many for any: on a pool with affinity a request whose process has
    /// nobody waiting for it need not queue behind those waiting for
    /// others.
    wanting: Vec<AtomicUsize>,
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
            wanting: (0..=n).map(|_| AtomicUsize::new(0)).collect(),
            rr: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
            successor: std::sync::OnceLock::new(),
            epoch: Instant::now(),
            listeners: Mutex::new((0..n).map(|_| None).collect()),
            rundir,
            learned: Mutex::new(HashMap::new()),
        }
    }

    /// Server `proc` failed (refused a connection, died mid-request): out
    /// of rotation for `d` when the pool has another to offer; its parked
    /// connections are closed.
    pub fn hold_off(&self, proc: &Proc, d: Duration) {
        proc.failures.fetch_add(1, Ordering::Relaxed);
        proc.drop_idle();
        if self.procs.len() > 1 {
            let until = mono_ms() + d.as_millis() as u64;
            proc.down_until.store(until, Ordering::Relaxed);
            // Keys it served map to other processes now: their waiters
            // look again rather than wait for slots it will not take.
            if self.spec.affinity != Affinity::None {
                self.wake_all();
            }
        }
    }

    /// A process's health checks changed their verdict: waiters look
    /// again (with affinity their keys may map elsewhere now; a process
    /// back in rotation has free slots nobody was signalled).
    pub(crate) fn health_changed(&self) {
        self.wake_all();
    }

    fn clock(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// How many wait for process `want` ([`ANY`]: for any process).
    fn wanting(&self, want: usize) -> &AtomicUsize {
        &self.wanting[want.min(self.procs.len())]
    }

    /// Whether nobody waits for a slot that a request for process `want`
    /// could take: then it may take one without queueing.
    fn none_ahead(&self, want: usize) -> bool {
        if want == ANY {
            self.waiting() == 0
        } else {
            self.wanting(want).load(Ordering::Relaxed) == 0
                && self.wanting(ANY).load(Ordering::Relaxed) == 0
        }
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
        // First come, first served: while others wait for a slot this
        // request could use, it queues behind them instead of taking the
        // next free one.
        let want = self.want(key, skip);
        if self.none_ahead(want) {
            if let Ok(l) = self.claim(want, skip) {
                return Ok(l);
            }
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.spec.queue {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(NoProcess::QueueFull);
        }
        self.wanting(want).fetch_add(1, Ordering::AcqRel);
        // Pairs with the fence in `wake` (see there).
        std::sync::atomic::fence(Ordering::SeqCst);
        let queue = &self.queues[worker_index() % self.queues.len()];
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        queue.push(ticket, want);
        // Leaves the queue however the wait ends, the request's future
        // dropped (a client gone) included, and passes on the slots
        // signalled to it that it did not use.
        let mut place = Place {
            pool: self,
            queue,
            ticket,
            want,
            leased: false,
        };
        // With affinity the first in line may wait for another process: a
        // slot freed on this one's as it joined, which signalled nobody, is
        // signalled now (to the longest waiter for it: this one or one
        // older). Either the freeing side's wake saw this waiter in the
        // queue, or (the queue's lock ordering the two) this sees the slot.
        if self.spec.affinity != Affinity::None {
            self.signal_free(want);
        }
        let deadline = tokio::time::Instant::now() + self.spec.queue_timeout;
        // A slot free right now is promised to the waiter signalled for it:
        // try only when signalled, or when first in line (a slot freed
        // before this request joined signalled nobody; a process that
        // (re)starts frees none), then on a tick. Taking it otherwise would
        // make that waiter wait again: a saturated pool would serve its
        // waiters in an order close to random.
        let mut seen = None;
        let r = loop {
            if self.is_stopping() {
                // Stopped meanwhile ([`stop`] wakes every waiter): no slot
                // of this pool will be free again.
                break Err(NoProcess::Stopped);
            }
            let now = tokio::time::Instant::now();
            if seen.is_some() || queue.is_front(ticket) || now >= deadline {
                match self.try_lease(key, skip) {
                    Ok(l) => {
                        place.leased = true;
                        break Ok(l);
                    }
                    Err(want) => {
                        if let Some(n) = seen {
                            queue.missed(ticket, n);
                        }
                        if place.wait_for(want) {
                            // Signalled for a slot on a process it no
                            // longer wants: whoever can use that one looks.
                            if seen.is_some_and(|n| n > 0) {
                                self.wake_all();
                            }
                            // A slot freed on its new process before it
                            // counted as waiting for it signalled nobody.
                            self.signal_free(want);
                        }
                    }
                }
            }
            if now >= deadline {
                break Err(NoProcess::Timeout);
            }
            let tick = now + Duration::from_millis(100);
            let signal = std::future::poll_fn(|cx| queue.poll_signal(ticket, cx));
            seen = tokio::time::timeout_at(deadline.min(tick), signal)
                .await
                .ok();
        };
        drop(place);
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

    /// A slot was freed on process `freed` ([`ANY`]: on some process):
    /// signal one waiter that can use it, not all. Each worker thread has
    /// its own FIFO queue, and a slot freed here goes to a waiter on this
    /// thread (no cross-thread wake-up, which costs a context switch and
    /// leaves the process idle meanwhile) unless a waiter elsewhere has
    /// waited [`FAIRNESS`] longer than the longest one here: then the
    /// longest waiter of all gets it. Without affinity every waiter can
    /// use every slot; with it, one may wait for one process in
    /// particular.
    fn wake(&self, freed: usize) {
        // Nobody waits (the usual case): no queue to lock. One joining
        // now tries for a slot itself once first in line; the fence here
        // and the one after its `waiting` increment make sure that either
        // this sees it or it sees the slot this freed.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::Relaxed) == 0 {
            return;
        }
        // Those waiting all wait for other processes (affinity).
        if freed != ANY
            && self.wanting(freed).load(Ordering::Relaxed) == 0
            && self.wanting(ANY).load(Ordering::Relaxed) == 0
        {
            return;
        }
        let here = worker_index() % self.queues.len();
        let mut oldest: Option<(usize, Instant)> = None;
        let mut here_at = None;
        for (i, q) in self.queues.iter().enumerate() {
            if let Some(at) = q.oldest(freed) {
                if i == here {
                    here_at = Some(at);
                }
                if oldest.is_none_or(|(_, o)| at < o) {
                    oldest = Some((i, at));
                }
            }
        }
        let target = match (oldest, here_at) {
            (Some((_, first_at)), Some(at)) if at <= first_at + FAIRNESS => here,
            (Some((first, _)), _) => first,
            // Every waiter that can use it has a slot coming: this one goes
            // along with the first's, which passes it on (none can: it
            // stays free for the next request).
            (None, _) => {
                if !self.queues[here].signal_one(freed) {
                    let _ = self.queues.iter().any(|q| q.signal_one(freed));
                }
                return;
            }
        };
        self.queues[target].signal_one(freed);
    }

    /// Every waiter looks again: a process started, the pool stops, or a
    /// slot went unused where the pool cannot tell who may use it.
    fn wake_all(&self) {
        for q in &self.queues {
            q.recheck_all();
        }
    }

    /// The process a request with affinity key `key` goes to, or [`ANY`]
    /// (no key, or no process for it now).
    fn want(&self, key: Option<&[u8]>, skip: Option<usize>) -> usize {
        let Some(key) = key else {
            return ANY;
        };
        let now = mono_ms();
        self.affine(key, &|p| self.usable(p, skip, now))
            .map_or(ANY, |p| p.index)
    }

    /// Signals a free slot on process `want` (any, for [`ANY`]) to the
    /// longest waiter for it, if there is one: called by a waiter that has
    /// just counted itself as waiting for `want`, after the fence that
    /// pairs with the one in [`Pool::wake`].
    fn signal_free(&self, want: usize) {
        if let Some(p) = self.free_slot(want) {
            self.wake(p);
        }
    }

    /// A usable process with a free slot: process `want`, or any one for
    /// [`ANY`].
    fn free_slot(&self, want: usize) -> Option<usize> {
        let now = mono_ms();
        let room = |p: &Proc| self.usable(p, None, now) && p.busy() < p.capacity();
        match self.procs.get(want) {
            Some(p) => room(p).then_some(want),
            None => self.procs.iter().position(|p| room(p)),
        }
    }

    /// Running, passing its health checks, not held off after a failure:
    /// an affinity key whose process is out falls to the next-best one
    /// instead of waiting for it.
    fn usable(&self, p: &Proc, skip: Option<usize>, now: u64) -> bool {
        Some(p.index) != skip
            && p.state() == ProcState::Running
            && p.is_healthy()
            && now >= p.down_until.load(Ordering::Relaxed)
    }

    /// The usable process for affinity key `key`: the one that gave the
    /// key out, else the rendezvous choice.
    fn affine(&self, key: &[u8], usable: &dyn Fn(&Proc) -> bool) -> Option<&Arc<Proc>> {
        // A key its process gave out goes back to it.
        let owner = self.learned.lock().ok().and_then(|m| m.get(key).copied());
        if let Some(p) = owner.and_then(|i| self.procs.get(i)).filter(|p| usable(p)) {
            return Some(p);
        }
        // Rendezvous hashing: the running process with the highest score
        // for this key. A process added or lost moves only its own keys.
        self.procs
            .iter()
            .filter(|p| usable(p))
            .max_by_key(|p| score(key, p.index))
    }

    /// A lease, or the process the request waits for ([`ANY`]: any).
    fn try_lease(
        self: &Arc<Self>,
        key: Option<&[u8]>,
        skip: Option<usize>,
    ) -> Result<Lease, usize> {
        self.claim(self.want(key, skip), skip)
    }

    /// A lease on process `want` (its [`Pool::want`]), or on the one the
    /// pool's `balance` picks when that is [`ANY`].
    fn claim(self: &Arc<Self>, want: usize, skip: Option<usize>) -> Result<Lease, usize> {
        let Some(p) = self.procs.get(want) else {
            return self.try_balanced(skip).ok_or(ANY);
        };
        if p.try_claim(mono_ms()) {
            Ok(Lease {
                proc: p.clone(),
                pool: self.clone(),
            })
        } else {
            Err(want)
        }
    }

    /// A lease on the process the pool's `balance` picks.
    fn try_balanced(self: &Arc<Self>, skip: Option<usize>) -> Option<Lease> {
        let now = mono_ms();
        let usable = |p: &Arc<Proc>| self.usable(p, skip, now);
        let lease = |p: &Arc<Proc>| Lease {
            proc: p.clone(),
            pool: self.clone(),
        };
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

/// Replaces `old` by `new` (a reload changed its configuration): requests
/// still routed to `old` go to `new` from now on, and `old` drains in the
/// background (see [`stop`]).
pub(crate) fn retire(old: Arc<Pool>, new: &Arc<Pool>) {
    let _ = old.successor.set(new.clone());
    tokio::task::spawn_local(async move { stop(&old).await });
}

/// Spawns and supervises a pool's processes until it is stopped (its
/// health checks: [`crate::upstream::start`]).
pub fn start(pool: &Arc<Pool>) {
    tokio::task::spawn_local(expire_idle(pool.clone()));
    let PoolKind::Spawn { min, .. } = &pool.spec.kind else {
        return;
    };
    for i in 0..*min {
        tokio::task::spawn_local(supervise(pool.clone(), i));
    }
    tokio::task::spawn_local(scale(pool.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::path::Path;

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
        let spec = SpecTable {
            name: "t",
            address: Some(vec!["127.0.0.1:9".into()]),
            capacity: Some(1),
            ..SpecTable::new("t", Path::new("."))
        }
        .build()
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

    /// Waiters that polled on the 100 ms tick at different moments while
    /// the slot was held still get it in the order they came. (Waiting on
    /// a `Notify` re-armed at each tick served them in the order of their
    /// last tick: close to random, a tail ten times the median.)
    #[test]
    fn waiters_get_freed_slots_in_arrival_order_however_long_they_waited() {
        local(async {
            let pool = one_slot_pool();
            let held = pool.lease(None, None).await.expect("first lease");
            let order = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            let mut tasks = Vec::new();
            for i in 0..6 {
                let (pool, order) = (pool.clone(), order.clone());
                tasks.push(tokio::task::spawn_local(async move {
                    let l = pool.lease(None, None).await.expect("lease");
                    order.borrow_mut().push(i);
                    tokio::task::yield_now().await;
                    drop(l);
                }));
                tokio::time::sleep(Duration::from_millis(37)).await;
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
            assert_eq!(pool.waiting(), 6);
            drop(held);
            for t in tasks {
                t.await.expect("task");
            }
            assert_eq!(*order.borrow(), [0, 1, 2, 3, 4, 5]);
        });
    }

    /// A request that gives up while waiting (its client left: the future
    /// is dropped) leaves the queue, and a slot signalled to it goes on to
    /// the next waiter instead of idling.
    #[test]
    fn a_waiter_dropped_while_signalled_passes_its_slot_on() {
        local(async {
            let pool = one_slot_pool();
            let held = pool.lease(None, None).await.expect("first lease");
            let gone = {
                let pool = pool.clone();
                tokio::task::spawn_local(async move {
                    let _ = pool.lease(None, None).await;
                })
            };
            tokio::task::yield_now().await;
            let next = {
                let pool = pool.clone();
                tokio::task::spawn_local(async move { pool.lease(None, None).await.is_ok() })
            };
            tokio::task::yield_now().await;
            assert_eq!(pool.waiting(), 2);
            // The slot is signalled to the first waiter, which goes away
            // before it runs.
            drop(held);
            gone.abort();
            // Not on the 100 ms tick: the second waiter is not first in
            // line until the first leaves, and is signalled then, within a
            // few turns of the scheduler.
            for _ in 0..20 {
                if next.is_finished() {
                    break;
                }
                tokio::task::yield_now().await;
            }
            assert!(next.is_finished(), "the slot idled until the tick");
            assert!(next.await.expect("task"));
            assert_eq!(pool.waiting(), 0);
        });
    }

    /// Two processes of one slot each, requests routed by header `X-User`.
    fn affinity_pool() -> Arc<Pool> {
        let spec = SpecTable {
            name: "t",
            address: Some(vec!["127.0.0.1:9".into(), "127.0.0.1:10".into()]),
            capacity: Some(1),
            affinity: Some("header:X-User"),
            ..SpecTable::new("t", Path::new("."))
        }
        .build()
        .expect("spec");
        Arc::new(Pool::new(spec, None, 0))
    }

    /// A key the pool routes to process `index` (of two).
    fn key_for(index: usize) -> Vec<u8> {
        (0..)
            .map(|i| format!("user{i}").into_bytes())
            .find(|k| score(k, index) > score(k, 1 - index))
            .expect("a key")
    }

    /// A lease future that counts how often it is polled.
    fn counted(
        pool: &Arc<Pool>,
        key: Vec<u8>,
        polls: std::rc::Rc<std::cell::Cell<usize>>,
    ) -> tokio::task::JoinHandle<usize> {
        let pool = pool.clone();
        tokio::task::spawn_local(async move {
            let lease = pool.lease(Some(&key), None);
            tokio::pin!(lease);
            let l = std::future::poll_fn(|cx| {
                polls.set(polls.get() + 1);
                lease.as_mut().poll(cx)
            })
            .await
            .expect("lease");
            l.proc.index
        })
    }

    /// With affinity (HAProxy's `balance hdr`, nginx's `hash`), a slot
    /// freed on one process wakes a waiter for that process only: waking
    /// every waiter to look cost the whole queue's work per slot. The
    /// waiters for the other process stay parked.
    #[test]
    fn a_slot_freed_on_one_process_of_an_affinity_pool_wakes_no_waiter_for_another() {
        local(async {
            let pool = affinity_pool();
            let (k0, k1) = (key_for(0), key_for(1));
            let h0 = pool.lease(Some(&k0), None).await.expect("lease 0");
            let h1 = pool.lease(Some(&k1), None).await.expect("lease 1");
            assert_eq!((h0.proc.index, h1.proc.index), (0, 1));
            let polls: Vec<_> = (0..6)
                .map(|_| std::rc::Rc::new(std::cell::Cell::new(0)))
                .collect();
            let mut tasks = Vec::new();
            for (i, p) in polls.iter().enumerate() {
                let key = if i == 5 { k1.clone() } else { k0.clone() };
                tasks.push(counted(&pool, key, p.clone()));
                tokio::task::yield_now().await;
            }
            assert_eq!(pool.waiting(), 6);
            let before: Vec<usize> = polls.iter().map(|p| p.get()).collect();
            drop(h1);
            let t5 = tasks.pop().expect("task");
            assert_eq!(t5.await.expect("task"), 1);
            for _ in 0..5 {
                tokio::task::yield_now().await;
            }
            let after: Vec<usize> = polls.iter().map(|p| p.get()).collect();
            assert_eq!(after[..5], before[..5], "waiters for process 0 were woken");
            drop(h0);
            for t in tasks {
                assert_eq!(t.await.expect("task"), 0);
            }
            assert_eq!(pool.waiting(), 0);
        });
    }

    /// Requests on four worker threads, most with keys, some without,
    /// while the processes take turns being held off (their keys move to
    /// the other and back): every request gets a slot long before
    /// `queue_timeout`. A freed slot that signalled nobody while slots
    /// kept coming free would show as a request waiting it out. (The end
    /// of a hold-off is no event: the first in line notices it on its
    /// 100 ms tick.)
    #[test]
    fn affinity_leases_across_threads_never_wait_out_the_queue_while_slots_come_free() {
        let spec = SpecTable {
            name: "t",
            address: Some(vec!["127.0.0.1:9".into(), "127.0.0.1:10".into()]),
            capacity: Some(1),
            affinity: Some("header:X-User"),
            queue_timeout: Some(Duration::from_secs(20)),
            ..SpecTable::new("t", Path::new("."))
        }
        .build()
        .expect("spec");
        let pool = Arc::new(Pool::new(spec, None, 0));
        let threads: Vec<_> = (0..4)
            .map(|w| {
                let pool = pool.clone();
                std::thread::spawn(move || {
                    crate::local::set_worker_index(w);
                    local(async move {
                        let mut tasks = Vec::new();
                        for c in 0..6usize {
                            let pool = pool.clone();
                            tasks.push(tokio::task::spawn_local(async move {
                                for i in 0..150usize {
                                    let key = format!("user{}", (w * 31 + c * 7 + i) % 11);
                                    let key = (i % 5 != 0).then_some(key.as_bytes());
                                    let t = Instant::now();
                                    let l = pool.lease(key, None).await.expect("lease");
                                    assert!(
                                        t.elapsed() < Duration::from_secs(5),
                                        "waited {:?}",
                                        t.elapsed()
                                    );
                                    if i % 40 == 7 {
                                        l.hold_off(Duration::from_millis(3));
                                    }
                                    tokio::task::yield_now().await;
                                    drop(l);
                                }
                            }));
                        }
                        for t in tasks {
                            t.await.expect("task");
                        }
                    })
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(pool.waiting(), 0);
        assert!(pool.wanting.iter().all(|w| w.load(Ordering::Relaxed) == 0));
    }

    /// A request for an idle process does not queue behind requests
    /// waiting for a busy one: they could not use its slot.
    #[test]
    fn a_request_for_an_idle_process_of_an_affinity_pool_does_not_wait_behind_another_process() {
        local(async {
            let pool = affinity_pool();
            let (k0, k1) = (key_for(0), key_for(1));
            let held = pool.lease(Some(&k0), None).await.expect("lease 0");
            let waiter = {
                let (pool, k0) = (pool.clone(), k0.clone());
                tokio::task::spawn_local(async move { pool.lease(Some(&k0), None).await.is_ok() })
            };
            tokio::task::yield_now().await;
            assert_eq!(pool.waiting(), 1);
            let other = pool.lease(Some(&k1), None);
            tokio::pin!(other);
            let got = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(match other.as_mut().poll(cx) {
                    std::task::Poll::Ready(r) => r.ok().map(|l| l.proc.index),
                    std::task::Poll::Pending => None,
                })
            })
            .await;
            assert_eq!(got, Some(1), "it queued behind the waiter for process 0");
            drop(held);
            assert!(waiter.await.expect("task"));
        });
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
