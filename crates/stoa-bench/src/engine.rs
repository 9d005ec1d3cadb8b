//! The load engine: one mio event loop per thread, each owning its clients
//! (closed loop) or connections (open loop) for the whole run.
//!
//! A request goes Connecting -> Writing -> Reading and ends in exactly one
//! outcome (a complete response or a [`Failure`]), counted in the thread's
//! [`Record`]. Sockets are registered once, edge-triggered, for reading and
//! writing, so a request costs one write and (usually) one read, with no
//! epoll_ctl in between (wrk adds two per request). The requests that follow
//! the responses of one turn of the loop are queued and written at the start
//! of the next turn, right after a non-blocking look for more events: the
//! loop blocks only when it has nothing to write.
//!
//! Every second each thread sends an [`Interval`] (a histogram and counters
//! for that second) to the collector, which builds the timeline, the HDR
//! interval log and the live progress; at the end it sends its [`Record`].

mod h3;

use crate::h2::{H2Conn, H2Error, Stream};
use crate::plan::{Plan, RequestSpec};
use crate::record::{new_hist, Failure, Moments, Phases, Record};
use crate::transport::{Conn, Handshake};
use crate::util::Rng;
use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::Sender;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use stoa_h1::{BodyDecoder, Framing, ResponseHead};

/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Pause before a client tries again after a failed connect, so that a
/// closed port does not turn the run into a busy loop of refusals.
const CONNECT_BACKOFF: Duration = Duration::from_millis(10);
/// Set by the SIGINT handler of the `stoa` binary: stop and report.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Why and when a run stopped early.
#[derive(Debug, Clone)]
pub struct AbortInfo {
    pub reason: String,
    pub at: Duration,
    pub active_clients: u64,
}

/// State shared by the worker threads and the collector.
pub struct Shared {
    pub plan: Plan,
    pub start: Instant,
    pub deadline: Option<Instant>,
    /// Requests started so far (tickets for `-n`).
    pub issued: AtomicU64,
    pub stop: AtomicBool,
    /// Body length of the first complete response (ab's Document Length);
    /// `u64::MAX` until then.
    pub doc_len: AtomicU64,
    /// Body length of the first complete response to each request of the
    /// mix (`u64::MAX` until then): lengths are checked per URL, since
    /// different URLs legitimately differ.
    pub doc_lens: Vec<AtomicU64>,
    /// Server software of the first response.
    pub server: Mutex<Option<String>>,
    pub active_clients: AtomicU64,
    /// Open loop: requests in flight over all threads.
    pub in_flight: AtomicU64,
    /// Most clients running at once (closed loop) or requests in flight at
    /// once (open loop).
    pub peak_active: AtomicU64,
    pub errors: AtomicU64,
    pub abort: Mutex<Option<AbortInfo>>,
    /// Closed loop: how long the run spent at each number of clients
    /// running (changed only when a client starts or leaves, so the lock
    /// is not on the per-request path).
    pub level_clock: Mutex<LevelClock>,
    /// The per-request log (`--log`): each thread appends whole lines from
    /// its own buffer, LOG_CHUNK bytes at a time.
    pub log: Option<Mutex<std::fs::File>>,
    /// The first error writing the log (logging stops there).
    pub log_error: Mutex<Option<String>>,
    /// The first TLS failure (a refused certificate stops the run: every
    /// connection would fail the same way).
    pub tls_error: Mutex<Option<String>>,
    /// Version, cipher suite and ALPN protocol of the first handshake.
    pub tls_params: Mutex<Option<(String, String, Option<String>)>>,
    /// HTTP/3: the first stream reset or connection error after the
    /// handshake, with its code.
    pub h3_error: Mutex<Option<String>>,
    /// `running_every`: the running moments over the responses in the
    /// order they completed (all threads), a point every N responses.
    pub running: Option<Mutex<Running>>,
}

/// The running mean and deviation per response.
#[derive(Debug, Default)]
pub struct Running {
    pub m: Moments,
    /// (responses so far, seconds from the start, mean us, sd us).
    pub points: Vec<(u64, f64, f64, f64)>,
}

impl Running {
    pub fn point(&mut self, at: f64) {
        let m = &self.m;
        if m.n > 0 && self.points.last().is_none_or(|p| p.0 != m.n) {
            self.points.push((m.n, at, m.mean(), m.stddev()));
        }
    }
}

/// A thread writes its log lines once it has this many bytes of them: one
/// write per few hundred requests, none per request.
const LOG_CHUNK: usize = 64 * 1024;

/// Time spent at each level of clients running.
#[derive(Debug)]
pub struct LevelClock {
    at: Instant,
    level: u64,
    /// Seconds at level `i`.
    pub secs: Vec<f64>,
}

impl LevelClock {
    /// The level is `level` from `now` on.
    pub fn set(&mut self, level: u64, now: Instant) {
        self.advance(now);
        self.level = level;
    }

    /// Counts the time up to `now` at the current level.
    pub fn advance(&mut self, now: Instant) {
        let now = now.max(self.at);
        let i = self.level.min(1 << 20) as usize;
        if self.secs.len() <= i {
            self.secs.resize(i + 1, 0.0);
        }
        self.secs[i] += (now - self.at).as_secs_f64();
        self.at = now;
    }
}

impl Shared {
    pub fn new(plan: Plan) -> Shared {
        let start = Instant::now();
        let running = plan.running_every.map(|_| Mutex::new(Running::default()));
        Shared {
            doc_lens: plan
                .requests
                .iter()
                .map(|_| AtomicU64::new(u64::MAX))
                .collect(),
            deadline: plan.duration.map(|d| start + d),
            plan,
            start,
            issued: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            doc_len: AtomicU64::new(u64::MAX),
            server: Mutex::new(None),
            active_clients: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            peak_active: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            abort: Mutex::new(None),
            level_clock: Mutex::new(LevelClock {
                at: start,
                level: 0,
                secs: Vec::new(),
            }),
            log: None,
            log_error: Mutex::new(None),
            tls_error: Mutex::new(None),
            tls_params: Mutex::new(None),
            h3_error: Mutex::new(None),
            running,
        }
    }

    /// One more failed request (a transport failure, or ab's length
    /// check), against `[abort] errors_over`.
    fn count_error(&self, now: Instant) {
        let errs = self.errors.fetch_add(1, Relaxed) + 1;
        if let Some(max) = self.plan.abort.errors_over {
            if errs > max {
                self.abort(format!("more than {max} failed requests"), now);
            }
        }
    }

    /// Stops the run for `reason` (the first reason wins).
    pub fn abort(&self, reason: String, now: Instant) {
        if let Ok(mut a) = self.abort.lock() {
            if a.is_none() {
                *a = Some(AbortInfo {
                    reason,
                    at: now.saturating_duration_since(self.start),
                    active_clients: self.active_clients.load(Relaxed),
                });
            }
        }
        self.stop.store(true, Relaxed);
    }

    fn stopping(&self) -> bool {
        self.stop.load(Relaxed) || INTERRUPTED.load(Relaxed)
    }

    fn take_ticket(&self) -> bool {
        match self.plan.limit {
            Some(n) => self.issued.fetch_add(1, Relaxed) < n,
            None => {
                self.issued.fetch_add(1, Relaxed);
                true
            }
        }
    }

    /// A client started or left: the level of clients running changed.
    fn clients_changed(&self, now: Instant) {
        if let Ok(mut c) = self.level_clock.lock() {
            c.set(self.active_clients.load(Relaxed), now);
        }
    }

    fn tickets_left(&self) -> bool {
        self.plan
            .limit
            .is_none_or(|n| self.issued.load(Relaxed) < n)
    }
}

/// One second (or the last, partial one) of one thread.
#[derive(Debug)]
pub struct Interval {
    pub thread: usize,
    pub sec: u64,
    /// Length of this interval (1 s but for the last).
    pub length: Duration,
    pub hist: Histogram<u64>,
    pub moments: Moments,
    pub responses: u64,
    pub errors: u64,
    pub bytes: u64,
    /// Clients running (closed loop) or requests in flight (open loop),
    /// averaged over the interval (a level sampled at its end would belong
    /// to the next one: a ramp's step lands on the boundary).
    pub active: f64,
    /// Complete responses by status code in this second (code 0: outside
    /// 100..=599).
    pub status: Vec<(u16, u64)>,
}

/// What the worker threads send to the collector.
pub enum Msg {
    Interval(Box<Interval>),
    Done {
        thread: usize,
        record: Box<Record>,
        /// Time of the last completed request (ab's end of the test).
        last: Option<Instant>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No request; the connection, if any, is kept alive.
    Idle,
    /// Think time before the next request (timer set).
    Thinking,
    /// Waiting after a failed connect (timer set).
    Backoff,
    Connecting,
    /// Connected; the TLS handshake is under way.
    Handshaking,
    Writing,
    Reading,
    /// The client left (quota reached, or no more tickets).
    Finished,
}

/// A final response head's verdicts, for an identical next head.
#[derive(Clone, Copy)]
struct HeadSeen {
    /// The request was HEAD (the framing depends on it).
    is_head: bool,
    status: u16,
    framing: Framing,
    keep: bool,
}

/// A templated request over HTTP/2 or HTTP/3, rendered for one request:
/// its HTTP/1 text (the request log's target) and its frames.
#[derive(Default)]
struct Rendered {
    text: Vec<u8>,
    h2: Option<crate::h2::H2Request>,
    h3: Option<crate::h3::H3Request>,
}

impl Rendered {
    /// The frames of `text` (a body of `body_len` bytes at its end) for
    /// the version `spec` goes over. The request with its placeholders
    /// converted before the run (the numbers change no field), so this
    /// does too; if it did not, the request goes as converted then.
    fn render(&mut self, spec: &RequestSpec, body_len: usize, tls: bool) {
        if spec.h2.is_some() {
            let scheme = if tls { "https" } else { "http" };
            self.h2 = crate::h2::H2Request::from_h1(&self.text, body_len, scheme).ok();
        } else if spec.h3.is_some() {
            self.h3 = crate::h3::H3Request::from_h1(&self.text, body_len, "https").ok();
        }
    }
}

/// The HTTP/2 form of a slot's request: rendered for a template, else
/// encoded before the run.
fn h2_request<'b>(
    spec: &'b RequestSpec,
    rendered: &'b Option<Box<Rendered>>,
) -> Option<&'b crate::h2::H2Request> {
    match (&spec.template, rendered.as_deref()) {
        (Some(_), Some(Rendered { h2: Some(r), .. })) => Some(r),
        _ => spec.h2.as_deref(),
    }
}

/// The HTTP/3 form of a slot's request, as [`h2_request`].
fn h3_request<'b>(
    spec: &'b RequestSpec,
    rendered: &'b Option<Box<Rendered>>,
) -> Option<&'b crate::h3::H3Request> {
    match (&spec.template, rendered.as_deref()) {
        (Some(_), Some(Rendered { h3: Some(r), .. })) => Some(r),
        _ => spec.h3.as_deref(),
    }
}

struct Slot {
    phase: Phase,
    stream: Option<Conn>,
    /// Bumped for every new socket: events of an older one are ignored.
    conn_gen: u32,
    /// Bumped whenever a timer of this slot is set.
    timer_gen: u32,
    rng: Rng,
    done_reqs: u64,
    /// The client's number from 1 (closed loop: in the order clients
    /// start; open loop: the connection's), `{client}` in templates.
    client: u64,
    // The request in progress.
    req: usize,
    /// A templated request, rendered for this client (its capacity is
    /// reused from request to request).
    wbuf: Vec<u8>,
    /// Over HTTP/2 and HTTP/3, a templated request rendered (kept from
    /// request to request).
    rendered: Option<Box<Rendered>>,
    /// Length of the request and of its body (a templated one's vary).
    req_len: usize,
    body_len: usize,
    /// Clients running when it started, itself included (kept when the
    /// clients vary).
    level: u32,
    written: usize,
    t_start: Instant,
    t_conn: Instant,
    /// When this request's own connection was established (TCP) and its
    /// TLS handshake done; `None` on a reused connection.
    t_tcp: Option<Instant>,
    t_tls: Option<Instant>,
    t_written: Option<Instant>,
    t_first: Option<Instant>,
    intended: Option<Instant>,
    /// This request runs on a connection that served an earlier one.
    reused: bool,
    retried: bool,
    head_buf: Vec<u8>,
    /// HTTP/2: the state of this client's connection (`None` over
    /// HTTP/1; replaced when the connection is).
    h2: Option<Box<H2Conn>>,
    /// `--max-concurrent-streams` > 1: the shared connection this client
    /// is a stream of.
    group: Option<usize>,
    head: ResponseHead,
    /// What `head` (a final response's) decided, while its bytes stand
    /// for the next head: see [`Worker::feed`].
    head_seen: Option<HeadSeen>,
    got_head: bool,
    decoder: BodyDecoder,
    keep: bool,
    resp_bytes: u64,
    body_bytes: u64,
    /// Closed loop, `--corrected`: start of this client's previous request,
    /// and the count and sum (us) of the intervals between its starts: its
    /// observed rate.
    prev_start: Option<Instant>,
    gaps: u64,
    gap_sum_us: u64,
}

impl Slot {
    fn new(rng: Rng, client: u64, now: Instant) -> Slot {
        Slot {
            phase: Phase::Idle,
            stream: None,
            conn_gen: 0,
            timer_gen: 0,
            rng,
            done_reqs: 0,
            client,
            req: 0,
            wbuf: Vec::new(),
            rendered: None,
            req_len: 0,
            body_len: 0,
            level: 0,
            written: 0,
            t_start: now,
            t_conn: now,
            t_tcp: None,
            t_tls: None,
            t_written: None,
            t_first: None,
            intended: None,
            reused: false,
            retried: false,
            head_buf: Vec::new(),
            h2: None,
            group: None,
            head: ResponseHead::default(),
            head_seen: None,
            got_head: false,
            decoder: BodyDecoder::new(Framing::None),
            keep: false,
            resp_bytes: 0,
            body_bytes: 0,
            prev_start: None,
            gaps: 0,
            gap_sum_us: 0,
        }
    }

    fn active(&self) -> bool {
        matches!(
            self.phase,
            Phase::Connecting | Phase::Handshaking | Phase::Writing | Phase::Reading
        )
    }
}

/// How a logged request ended.
#[derive(Clone, Copy)]
enum LogStatus {
    Code(u16),
    Failed(Failure),
}

enum Feed {
    More,
    Done,
    Failed(Failure),
    /// The server will not process the request (HTTP/2 GOAWAY): send it
    /// again on a new connection, once.
    Retry,
}

#[inline]
fn us(d: Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

fn classify_connect(e: &io::Error) -> Failure {
    if e.kind() == io::ErrorKind::ConnectionRefused {
        Failure::ConnectRefused
    } else {
        Failure::Connect
    }
}

/// One worker thread.
pub struct Worker<'a> {
    id: usize,
    sh: &'a Shared,
    tx: Sender<Msg>,
    poll: Poll,
    slots: Vec<Slot>,
    free: Vec<usize>,
    timers: BinaryHeap<Reverse<(Instant, usize, u32)>>,
    rec: Record,
    iv: Interval,
    next_sec: Instant,
    rbuf: Vec<u8>,
    /// Slots whose request is to be written after this batch of events.
    pending: Vec<usize>,
    /// HTTP/2 connections shared by several clients (one per stream), and
    /// those with frames to write after this batch of events.
    groups: Vec<Group>,
    pending_groups: Vec<usize>,
    ended: Vec<Stream>,
    /// `--http3`: the QUIC connections and their endpoint.
    h3: Option<Box<h3::Side>>,
    /// Requests in progress.
    busy: u64,
    last_done: Option<Instant>,
    /// Time integral of the active level (clients in the closed loop,
    /// requests in flight in the open loop), in level-seconds, up to
    /// `area_at`.
    area: f64,
    area_at: Instant,
    /// The same integral per second of the run, from the current
    /// interval's second on (the front is `iv.sec`).
    sec_area: VecDeque<f64>,
    // Closed loop.
    spawned: u64,
    active: u64,
    no_more_tickets: bool,
    // Open loop.
    idle: Vec<usize>,
    sched_next: u64,
    sched_t0: Instant,
    sched_period: Duration,
    open_rng: Rng,
    /// Open loop: the number (from 1, over all threads) of the arrival
    /// being started, `{seq}` in templates.
    arrival_seq: u64,
    /// `--log`: this thread's lines not yet written.
    log: Option<Vec<u8>>,
    /// The status counts as of the last interval sent.
    status_seen: Vec<u64>,
    /// Keep the per-level table: only when the clients vary (a fixed
    /// `-c` run has one level; its cost, a histogram record per response,
    /// is not paid there).
    levels_on: bool,
}

impl<'a> Worker<'a> {
    pub fn new(id: usize, sh: &'a Shared, tx: Sender<Msg>) -> io::Result<Worker<'a>> {
        let plan = &sh.plan;
        let threads = plan.threads as u64;
        let (t0, period) = match plan.rate {
            Some(r) => {
                // Thread k sends at t0 + k/r, then every threads/r.
                let period = Duration::from_secs_f64(threads as f64 / r);
                (sh.start + Duration::from_secs_f64(id as f64 / r), period)
            }
            None => (sh.start, Duration::ZERO),
        };
        let rec = Record {
            total: plan.open_loop().then(Phases::default),
            corrected: (plan.corrected && !plan.open_loop()).then(Phases::default),
            ..Record::default()
        };
        Ok(Worker {
            id,
            sh,
            tx,
            poll: Poll::new()?,
            slots: Vec::new(),
            free: Vec::new(),
            timers: BinaryHeap::new(),
            rec,
            iv: Interval {
                thread: id,
                sec: 0,
                length: Duration::from_secs(1),
                hist: new_hist(),
                moments: Moments::default(),
                responses: 0,
                errors: 0,
                bytes: 0,
                active: 0.0,
                status: Vec::new(),
            },
            next_sec: sh.start + Duration::from_secs(1),
            rbuf: vec![0; 64 * 1024],
            pending: Vec::new(),
            groups: Vec::new(),
            pending_groups: Vec::new(),
            ended: Vec::new(),
            h3: plan
                .target
                .quic
                .as_ref()
                .filter(|_| plan.http3)
                .map(|q| Box::new(h3::Side::new(q))),
            busy: 0,
            last_done: None,
            area: 0.0,
            area_at: sh.start,
            sec_area: VecDeque::new(),
            spawned: 0,
            active: 0,
            no_more_tickets: false,
            idle: Vec::new(),
            sched_next: 0,
            sched_t0: t0,
            sched_period: period,
            open_rng: Rng::new(plan.seed, 1 << 40 | id as u64),
            arrival_seq: 0,
            log: sh.log.as_ref().map(|_| Vec::with_capacity(LOG_CHUNK + 512)),
            levels_on: plan.varying_clients(),
            status_seen: Vec::new(),
        })
    }

    /// This thread's share of `n` items dealt round-robin over the threads.
    fn share(&self, n: u64) -> u64 {
        let t = self.sh.plan.threads as u64;
        let k = self.id as u64;
        if n > k {
            (n - k - 1) / t + 1
        } else {
            0
        }
    }

    /// Clients running (closed loop) or requests in flight (open loop).
    fn level(&self) -> u64 {
        if self.sh.plan.open_loop() {
            self.busy
        } else {
            self.active
        }
    }

    /// Adds the active level since the last change to its time integral;
    /// called before every change of the level.
    fn account(&mut self, now: Instant) {
        if now <= self.area_at {
            return;
        }
        let level = self.level() as f64;
        self.area += level * (now - self.area_at).as_secs_f64();
        // The level was constant since `area_at`: split the span at the
        // seconds of the run.
        let mut t = self.area_at;
        while t < now {
            let sec = t.saturating_duration_since(self.sh.start).as_secs();
            let end = (self.sh.start + Duration::from_secs(sec + 1)).min(now);
            let i = sec.saturating_sub(self.iv.sec) as usize;
            if self.sec_area.len() <= i {
                self.sec_area.resize(i + 1, 0.0);
            }
            self.sec_area[i] += level * (end - t).as_secs_f64();
            t = end;
        }
        self.area_at = now;
    }

    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let plan = &self.sh.plan;
        let now = Instant::now();
        if plan.open_loop() {
            let conns = self.share(plan.concurrency);
            let t = plan.threads as u64;
            for i in 0..conns {
                let s = self.new_slot(Rng::new(plan.seed, i), self.id as u64 + i * t + 1, now);
                self.join_group(s, i);
                self.idle.push(s);
            }
        }
        let sweep_every =
            (plan.timeout / 20).clamp(Duration::from_millis(1), Duration::from_millis(50));
        let mut next_sweep = now + sweep_every;
        loop {
            let now = Instant::now();
            if self.sh.stopping() || self.sh.deadline.is_some_and(|d| now >= d) {
                let end = self.sh.deadline.map_or(now, |d| d.min(now));
                self.account(end);
                self.stop(end);
                break;
            }
            if plan.open_loop() {
                self.dispatch(now);
            } else {
                self.spawn_due(now);
            }
            if self.finished() {
                self.account(now);
                break;
            }
            if now >= self.next_sec {
                self.flush_interval(now);
            }
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + sweep_every;
            }
            while let Some(Reverse((t, s, g))) = self.timers.peek().copied() {
                if t > now {
                    break;
                }
                self.timers.pop();
                if s & h3::H3_BIT != 0 {
                    self.h3_timer(s & !h3::H3_BIT, g, t, now);
                } else if self.slots[s].timer_gen == g {
                    self.on_timer(s, now);
                }
            }
            // Sleep until the next thing to do.
            let mut wake = self.next_sec.min(next_sweep);
            if let Some(Reverse((t, _, _))) = self.timers.peek() {
                wake = wake.min(*t);
            }
            if let Some(d) = self.sh.deadline {
                wake = wake.min(d);
            }
            if plan.open_loop() {
                if !self.idle.is_empty() && !self.no_more_tickets {
                    wake = wake.min(self.intended(self.sched_next));
                }
            } else if self.ramping() {
                wake = wake.min(now + Duration::from_millis(5));
            }
            // With requests queued (on a connection of their own or as
            // streams of a shared one), look for events without blocking; the
            // queue is written right after that look (below), before the
            // new events are handled. So, as in wrk's loop, each turn writes
            // the requests of the previous turn's responses while reading
            // new ones, and the loop blocks only with nothing to write: the
            // server gets a steady stream instead of bursts it sleeps
            // between (each sleep costs a wake-up there and here).
            let queued = !self.pending.is_empty()
                || !self.pending_groups.is_empty()
                || self.h3.as_ref().is_some_and(|h| h.has_dirty());
            let timeout = if !queued {
                wake.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(100))
            } else {
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    self.sh.abort(format!("poll failed: {e}"), Instant::now());
                }
                continue;
            }
            self.flush();
            for ev in events.iter() {
                // One clock read per event, as wrk reads per response: with
                // one read per `poll` return, every response of a batch got
                // the same end stamp (and the next request on its slot the
                // same start), so a server answering one connection at a
                // time showed batches of identical start/latency pairs. A
                // vDSO read costs ~20 ns; measured in docs/BENCHMARKS.md.
                let now = Instant::now();
                let t = ev.token().0;
                if t & h3::H3_BIT != 0 {
                    let (g, gen) = (t & (h3::H3_BIT - 1), (t >> 32) as u32);
                    self.h3_event(g, gen, ev, now);
                    continue;
                }
                if t & GROUP_BIT != 0 {
                    let (g, gen) = (t & 0x7fff_ffff, (t >> 32) as u32);
                    if g < self.groups.len() && self.groups[g].gen == gen {
                        self.on_group(g, ev, now);
                    }
                    continue;
                }
                let (s, g) = (t & 0xffff_ffff, (t >> 32) as u32);
                if s >= self.slots.len() || self.slots[s].conn_gen != g {
                    continue;
                }
                match self.slots[s].phase {
                    Phase::Connecting => self.on_connecting(s, now),
                    Phase::Handshaking => self.on_handshake(s, now),
                    Phase::Writing => {
                        if ev.is_writable() {
                            self.write(s, now);
                        }
                        if self.slots[s].phase == Phase::Writing
                            && (ev.is_readable() || ev.is_read_closed())
                        {
                            self.read(s, now, ev.is_read_closed() || ev.is_error());
                        }
                    }
                    _ => {
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read(s, now, ev.is_read_closed() || ev.is_error());
                        }
                        if ev.is_writable() {
                            // TLS records (an alert, a key update answer)
                            // that waited for room in the socket.
                            if let Some(c) = self.slots[s].stream.as_mut() {
                                if c.is_tls() {
                                    let _ = c.flushed();
                                }
                            }
                            Self::write_h2_out(&mut self.slots[s]);
                        }
                    }
                }
            }
        }
        self.flush();
        // QUIC connections still open say goodbye (CONNECTION_CLOSE), so
        // the server does not keep them until its idle timeout.
        self.h3_stop();
        self.flush_log();
        let end = Instant::now();
        self.rec.counters.active_area += self.area;
        self.flush_partial(end);
        let _ = self.tx.send(Msg::Done {
            thread: self.id,
            record: Box::new(self.rec),
            last: self.last_done,
        });
    }

    fn new_slot(&mut self, rng: Rng, client: u64, now: Instant) -> usize {
        if let Some(s) = self.free.pop() {
            let old = &self.slots[s];
            let (cg, tg) = (old.conn_gen.wrapping_add(1), old.timer_gen.wrapping_add(1));
            self.slots[s] = Slot::new(rng, client, now);
            self.slots[s].conn_gen = cg;
            self.slots[s].timer_gen = tg;
            s
        } else {
            self.slots.push(Slot::new(rng, client, now));
            self.slots.len() - 1
        }
    }

    /// Whether more clients may still be started later.
    fn ramping(&self) -> bool {
        if self.no_more_tickets {
            return false;
        }
        match self.sh.plan.load.final_total() {
            Some(n) => self.spawned < self.share(n),
            None => true,
        }
    }

    fn finished(&self) -> bool {
        if self.sh.plan.open_loop() {
            self.no_more_tickets && self.busy == 0
        } else {
            self.active == 0 && !self.ramping()
        }
    }

    // ------------------------------------------------------------ closed loop

    fn spawn_due(&mut self, now: Instant) {
        if self.no_more_tickets {
            return;
        }
        let plan = &self.sh.plan;
        let want = self.share(plan.load.want(now.saturating_duration_since(self.sh.start)));
        let t = plan.threads as u64;
        while self.spawned < want {
            let client = self.id as u64 + self.spawned * t;
            self.spawned += 1;
            self.account(now);
            self.active += 1;
            let n = self.sh.active_clients.fetch_add(1, Relaxed) + 1;
            self.sh.peak_active.fetch_max(n, Relaxed);
            self.sh.clients_changed(now);
            let s = self.new_slot(Rng::new(plan.seed, client), client + 1, now);
            self.join_group(s, self.spawned - 1);
            let delay = match plan.first_delay {
                // Drawn from a stream of its own, so that adding a delay
                // does not change the client's requests and think times.
                Some((a, b)) if b > a => {
                    let mut r = Rng::new(plan.seed, client | 1 << 41);
                    a + (b - a).mul_f64(r.next_f64())
                }
                Some((a, _)) => a,
                None => Duration::ZERO,
            };
            if delay.is_zero() {
                self.begin_closed(s, now);
            } else {
                // Waiting for its first request, the client is running, as
                // a thinking one is.
                self.set_timer(s, now + delay, Phase::Thinking);
            }
            if self.no_more_tickets {
                break;
            }
        }
    }

    fn begin_closed(&mut self, s: usize, now: Instant) {
        if self.sh.stopping() {
            self.finish_client(s, now);
            return;
        }
        if !self.sh.take_ticket() {
            self.no_more_tickets = true;
            self.finish_client(s, now);
            return;
        }
        self.begin(s, now, None);
    }

    fn finish_client(&mut self, s: usize, now: Instant) {
        if self.slots[s].phase == Phase::Finished {
            return;
        }
        self.account(now);
        let slot = &mut self.slots[s];
        slot.phase = Phase::Finished;
        slot.stream = None;
        slot.timer_gen = slot.timer_gen.wrapping_add(1);
        if let (Some(g), true) = (slot.group, self.h3.is_some() && self.sh.plan.streams < 2) {
            // A client that leaves closes its own QUIC connection (a TCP
            // one closes with its socket).
            self.h3_drop(g, now);
        }
        self.active -= 1;
        self.sh.active_clients.fetch_sub(1, Relaxed);
        self.sh.clients_changed(now);
        self.free.push(s);
    }

    // ------------------------------------------------------------ open loop

    fn intended(&self, j: u64) -> Instant {
        self.sched_t0 + self.sched_period.mul_f64(j as f64)
    }

    /// Arrivals scheduled at or before `now`.
    fn due(&self, now: Instant) -> u64 {
        if now < self.sched_t0 {
            return 0;
        }
        let since = (now - self.sched_t0).as_secs_f64();
        (since / self.sched_period.as_secs_f64()).floor() as u64 + 1
    }

    /// Arrivals scheduled strictly before `end`: the ones a run ending at
    /// `end` owed. An arrival due exactly at the end belongs after it.
    /// Counted in whole nanoseconds, so that a run of 0.5 s at 100/s owes
    /// exactly 50 whatever the rounding of floating point.
    fn due_before(&self, end: Instant) -> u64 {
        if end <= self.sched_t0 {
            return 0;
        }
        // The period is whole nanoseconds, rounded down (1/14 s is
        // 71428571 ns): the arrival due exactly at the end of a run whose
        // length is a multiple of 1/rate lands a few nanoseconds before it
        // (14/s for 1 s: the 15th at 999999994 ns). Arrivals within 1 us
        // of the end belong to it.
        let since = (end - self.sched_t0).as_nanos();
        let since = if since > 1_000 { since - 1_000 } else { 1 };
        let period = self.sched_period.as_nanos().max(1);
        since.div_ceil(period).min(u128::from(u64::MAX)) as u64
    }

    /// The intended time of the next arrival if it is due (and has a ticket).
    fn next_arrival(&mut self, now: Instant) -> Option<Instant> {
        if self.no_more_tickets || self.sched_next >= self.due(now) {
            return None;
        }
        if !self.sh.take_ticket() {
            self.no_more_tickets = true;
            return None;
        }
        let t = self.intended(self.sched_next);
        // Thread k's j-th arrival is the (j * threads + k)-th of the run.
        self.arrival_seq = self.sched_next * self.sh.plan.threads as u64 + self.id as u64 + 1;
        self.sched_next += 1;
        Some(t)
    }

    fn dispatch(&mut self, now: Instant) {
        while let Some(&s) = self.idle.last() {
            match self.next_arrival(now) {
                Some(t) => {
                    self.idle.pop();
                    self.begin(s, now, Some(t));
                }
                None => break,
            }
        }
    }

    // ------------------------------------------------------------ requests

    fn begin(&mut self, s: usize, now: Instant, intended: Option<Instant>) {
        let plan = &self.sh.plan;
        let req = if plan.open_loop() {
            plan.pick(&mut self.open_rng)
        } else {
            plan.pick(&mut self.slots[s].rng)
        };
        self.account(now);
        self.busy += 1;
        if plan.open_loop() {
            let n = self.sh.in_flight.fetch_add(1, Relaxed) + 1;
            self.sh.peak_active.fetch_max(n, Relaxed);
        }
        let level = self.levels_on.then(|| self.sh.active_clients.load(Relaxed));
        let corrected = self.rec.corrected.is_some();
        let slot = &mut self.slots[s];
        if let Some(level) = level {
            // Bounded like `-c` (1 << 20 for a ramp without max).
            slot.level = level.min(1 << 20) as u32;
        }
        if corrected {
            // The interval since this client's previous request is
            // measured before the current one counts: a slow response
            // is corrected with the rate observed before it.
            if let Some(p) = slot.prev_start {
                slot.gaps += 1;
                slot.gap_sum_us = slot
                    .gap_sum_us
                    .saturating_add(us(now.saturating_duration_since(p)));
            }
            slot.prev_start = Some(now);
        }
        slot.req = req;
        let spec = &plan.requests[req];
        match &spec.template {
            None => {
                slot.req_len = spec.bytes.len();
                slot.body_len = spec.body_len;
            }
            Some(t) => {
                // The client's n-th request (closed loop), or the n-th
                // arrival of the run (open loop).
                let seq = if plan.open_loop() {
                    self.arrival_seq
                } else {
                    slot.done_reqs + 1
                };
                if spec.h2.is_some() || spec.h3.is_some() {
                    let r = slot.rendered.get_or_insert_with(Default::default);
                    slot.body_len = t.render(slot.client, seq, &mut r.text, spec.body_len);
                    slot.req_len = r.text.len();
                    r.render(spec, slot.body_len, plan.target.tls.is_some());
                } else {
                    slot.body_len = t.render(slot.client, seq, &mut slot.wbuf, spec.body_len);
                    slot.req_len = slot.wbuf.len();
                }
            }
        }
        slot.t_start = now;
        slot.t_tcp = None;
        slot.t_tls = None;
        slot.intended = intended;
        slot.retried = false;
        if let Some(g) = slot.group {
            if self.h3.is_some() {
                self.h3_begin(s, g, now);
            } else {
                self.group_begin(s, g, now);
            }
        } else if slot.stream.is_some() {
            slot.reused = true;
            self.send(s, now);
        } else {
            slot.reused = false;
            self.connect(s, now);
        }
    }

    fn reset_response(slot: &mut Slot) {
        slot.written = 0;
        slot.t_written = None;
        slot.t_first = None;
        slot.head_buf.clear();
        slot.got_head = false;
        slot.keep = false;
        slot.resp_bytes = 0;
        slot.body_bytes = 0;
    }

    fn connect(&mut self, s: usize, now: Instant) {
        self.rec.counters.connections += 1;
        let target = &self.sh.plan.target;
        let addr = target.addrs[0];
        let slot = &mut self.slots[s];
        slot.t_conn = now;
        slot.t_tcp = None;
        slot.t_tls = None;
        match TcpStream::connect(addr) {
            Ok(mut stream) => {
                slot.conn_gen = slot.conn_gen.wrapping_add(1);
                let token = Token((slot.conn_gen as usize) << 32 | s);
                if let Err(e) = self.poll.registry().register(
                    &mut stream,
                    token,
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    self.fail(s, classify_connect(&e), now);
                    return;
                }
                match Conn::new(stream, target.tls.as_ref()) {
                    Ok(c) => slot.stream = Some(c),
                    Err(_) => {
                        self.fail(s, Failure::Tls, now);
                        return;
                    }
                }
                slot.phase = Phase::Connecting;
            }
            Err(e) => self.fail(s, classify_connect(&e), now),
        }
    }

    fn on_connecting(&mut self, s: usize, now: Instant) {
        let slot = &mut self.slots[s];
        let Some(conn) = slot.stream.as_ref() else {
            return;
        };
        let stream = conn.socket();
        match stream.take_error() {
            Ok(Some(e)) | Err(e) => {
                self.fail(s, classify_connect(&e), now);
                return;
            }
            Ok(None) => {}
        }
        match stream.peer_addr() {
            Ok(_) => {
                let _ = stream.set_nodelay(true);
                slot.t_conn = now;
                slot.t_tcp = Some(now);
                if conn.is_tls() {
                    slot.phase = Phase::Handshaking;
                    self.on_handshake(s, now);
                } else {
                    self.send(s, now);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {}
            Err(e) => self.fail(s, classify_connect(&e), now),
        }
    }

    /// Moves slot `s`'s TLS handshake on; once done, the request goes.
    fn on_handshake(&mut self, s: usize, now: Instant) {
        let slot = &mut self.slots[s];
        let Some(conn) = slot.stream.as_mut() else {
            return;
        };
        match conn.handshake() {
            Handshake::Pending => {}
            Handshake::Done => {
                // The client's half of the handshake (key exchange,
                // signature check) took time since this batch's clock
                // was read: read it again.
                let now = Instant::now();
                slot.t_tls = Some(now);
                // ab's Connect includes the handshake: the connection is
                // usable from here.
                slot.t_conn = now;
                self.rec.counters.tls_handshakes += 1;
                if conn.resumed() {
                    self.rec.counters.tls_resumed += 1;
                }
                if self.sh.plan.http2 && !conn.alpn_is(b"h2") {
                    // h2load: "No protocol negotiated"; no fallback, the
                    // run is about HTTP/2.
                    if let Ok(mut e) = self.sh.tls_error.lock() {
                        e.get_or_insert_with(|| {
                            "the server did not choose h2 by ALPN (RFC 9113 §3.2)".into()
                        });
                    }
                    self.sh.stop.store(true, Relaxed);
                    self.fail(s, Failure::Tls, now);
                    return;
                }
                if self.rec.counters.tls_handshakes == 1 {
                    if let Ok(mut p) = self.sh.tls_params.lock() {
                        if p.is_none() {
                            *p = conn.tls_params();
                        }
                    }
                }
                self.send(s, now);
            }
            Handshake::Failed(f) => {
                if let Ok(mut e) = self.sh.tls_error.lock() {
                    e.get_or_insert_with(|| f.message.clone());
                }
                if f.fatal {
                    // Every connection would be refused the same way.
                    self.sh.stop.store(true, Relaxed);
                }
                self.fail(s, Failure::Tls, now);
            }
        }
    }

    /// Queues the request of slot `s`; [`flush`](Self::flush) writes the
    /// queue after the current batch of events. Writing the requests of a
    /// batch together, as wrk does, lets the server find several at once
    /// instead of being woken for each: fewer wake-ups on both sides.
    fn send(&mut self, s: usize, _now: Instant) {
        let sh: &'a Shared = self.sh;
        let slot = &mut self.slots[s];
        Self::reset_response(slot);
        if let Some(req) = h2_request(&sh.plan.requests[slot.req], &slot.rendered) {
            // The frames of this request on this connection's next stream
            // (the preface first on a new connection).
            let gen = slot.conn_gen;
            let h2 = match &mut slot.h2 {
                Some(h) if h.gen == gen => h,
                h => h.insert(Box::new(H2Conn::new(gen))),
            };
            h2.start(req, &mut slot.wbuf);
            slot.req_len = slot.wbuf.len();
        }
        slot.phase = Phase::Writing;
        self.pending.push(s);
    }

    /// Writes the queued requests. A request's clock starts when it is
    /// written (on a reused connection; on a new one, at connect).
    fn flush(&mut self) {
        self.h3_flush();
        if self.pending.is_empty() && self.pending_groups.is_empty() {
            return;
        }
        let mut now = Instant::now();
        let mut pending = std::mem::take(&mut self.pending);
        for &s in &pending {
            let slot = &mut self.slots[s];
            if slot.phase != Phase::Writing || slot.written != 0 || slot.stream.is_none() {
                continue;
            }
            if slot.reused {
                // Each write's own start: the writes before it in this
                // batch took their time (one syscall each).
                now = Instant::now();
                slot.t_start = now;
                slot.t_conn = now;
            }
            self.write(s, now);
        }
        pending.clear();
        self.pending = pending;
        let mut groups = std::mem::take(&mut self.pending_groups);
        for &g in &groups {
            self.groups[g].queued = false;
            self.group_write(g, now);
        }
        groups.clear();
        self.pending_groups = groups;
    }

    fn write(&mut self, s: usize, now: Instant) {
        let spec = &self.sh.plan.requests[self.slots[s].req];
        let slot = &mut self.slots[s];
        let Some(stream) = slot.stream.as_mut() else {
            return;
        };
        let bytes: &[u8] = if spec.template.is_some() || spec.h2.is_some() {
            &slot.wbuf
        } else {
            &spec.bytes
        };
        while slot.written < bytes.len() {
            match stream.write(&bytes[slot.written..]) {
                Ok(0) => {
                    self.write_failed(s, now);
                    return;
                }
                Ok(n) => {
                    slot.written += n;
                    self.rec.counters.bytes_sent += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.write_failed(s, now);
                    return;
                }
            }
        }
        match stream.flushed() {
            Ok(true) => {}
            // TLS records wait for room in the socket: a writable event
            // brings the slot back here.
            Ok(false) => return,
            Err(_) => {
                self.write_failed(s, now);
                return;
            }
        }
        self.rec.counters.body_sent += slot.body_len as u64;
        slot.t_written = Some(now);
        slot.phase = Phase::Reading;
    }

    fn write_failed(&mut self, s: usize, now: Instant) {
        let slot = &self.slots[s];
        if slot.reused && !slot.retried && slot.resp_bytes == 0 {
            self.retry(s, now);
        } else {
            self.fail(s, Failure::Reset, now);
        }
    }

    /// The server closed a kept-alive connection before answering: send the
    /// request again on a new connection, once (RFC 9112 §9.3.1).
    fn retry(&mut self, s: usize, now: Instant) {
        self.rec.counters.retries += 1;
        let slot = &mut self.slots[s];
        slot.stream = None;
        slot.retried = true;
        slot.reused = false;
        self.connect(s, now);
    }

    /// Reads what the socket has. A read shorter than the buffer means it
    /// is drained (epoll(7)), unless the event also reported the peer's
    /// close: then read on to the end of file, which no new edge announces.
    fn read(&mut self, s: usize, now: Instant, to_eof: bool) {
        let mut buf = std::mem::take(&mut self.rbuf);
        let gen = self.slots[s].conn_gen;
        if let Some(c) = self.slots[s].stream.as_mut() {
            c.readable();
        }
        loop {
            let slot = &mut self.slots[s];
            // A completed response may have moved the slot to a new
            // connection: this event was about the old one.
            if slot.conn_gen != gen {
                break;
            }
            let Some(stream) = slot.stream.as_mut() else {
                break;
            };
            let drains = stream.short_read_drains();
            match stream.read(&mut buf) {
                Ok(0) => {
                    self.on_eof(s, now);
                    break;
                }
                Ok(n) => {
                    self.rec.counters.bytes_read += n as u64;
                    self.iv.bytes += n as u64;
                    if !matches!(slot.phase, Phase::Reading | Phase::Writing) {
                        // Bytes nobody asked for on an idle connection.
                        slot.stream = None;
                        break;
                    }
                    let is_head = self.sh.plan.requests[slot.req].is_head;
                    match Self::feed(slot, &buf[..n], now, is_head) {
                        Feed::More => {}
                        Feed::Done => {
                            self.complete(s, now);
                        }
                        Feed::Failed(f) => {
                            self.fail(s, f, now);
                            break;
                        }
                        Feed::Retry => {
                            let slot = &self.slots[s];
                            if slot.reused && !slot.retried {
                                self.retry(s, now);
                            } else {
                                self.fail(s, Failure::Closed, now);
                            }
                            break;
                        }
                    }
                    if drains && n < buf.len() && !to_eof {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    // A bad TLS record.
                    if slot.active() {
                        self.fail(s, Failure::Tls, now);
                    } else {
                        slot.stream = None;
                    }
                    break;
                }
                Err(_) => {
                    if slot.active() {
                        if slot.reused && !slot.retried && slot.resp_bytes == 0 {
                            self.retry(s, now);
                        } else {
                            self.fail(s, Failure::Reset, now);
                        }
                    } else {
                        slot.stream = None;
                    }
                    break;
                }
            }
        }
        self.rbuf = buf;
        if self.slots[s].conn_gen == gen {
            Self::write_h2_out(&mut self.slots[s]);
        }
    }

    /// HTTP/2 frames owed to the server (SETTINGS and PING ACKs, window
    /// updates, the part of a request body the windows held back), if no
    /// request took them along; what the socket does not take now waits
    /// for it to be writable.
    fn write_h2_out(slot: &mut Slot) {
        let gen = slot.conn_gen;
        if let (Some(h2), Some(conn)) = (slot.h2.as_mut(), slot.stream.as_mut()) {
            if h2.gen == gen && !h2.out.is_empty() {
                let mut n = 0;
                while n < h2.out.len() {
                    match conn.write(&h2.out[n..]) {
                        Ok(0) | Err(_) => break,
                        Ok(k) => n += k,
                    }
                }
                h2.out.drain(..n);
                if conn.is_tls() {
                    let _ = conn.flushed();
                }
            }
        }
    }

    /// Takes response bytes; decides whether the response is complete.
    fn feed(slot: &mut Slot, data: &[u8], now: Instant, is_head: bool) -> Feed {
        if slot.h2.is_some() {
            return Self::feed_h2(slot, data, now);
        }
        if slot.t_first.is_none() {
            slot.t_first = Some(now);
        }
        slot.resp_bytes += data.len() as u64;
        let mut rest = data;
        while !slot.got_head {
            // A server answers a kept-alive connection with the same head
            // but for `Date`, which changes once a second: a head equal,
            // byte for byte, to the last one parses to the same status,
            // framing and keep-alive, so they are taken as they were (the
            // parse was a third of the generator's own instructions per
            // request, callgrind). The last head ends at its first blank
            // line, so equal bytes are the whole new head.
            if let Some(seen) = slot.head_seen {
                let last = slot.head.bytes();
                if slot.head_buf.is_empty() && seen.is_head == is_head && rest.starts_with(last) {
                    rest = &rest[last.len()..];
                    slot.head.status = seen.status;
                    slot.keep = seen.keep;
                    slot.decoder = BodyDecoder::new(seen.framing);
                    slot.got_head = true;
                    break;
                }
            }
            slot.head_seen = None;
            let parsed = if slot.head_buf.is_empty() {
                slot.head.parse(rest, MAX_HEAD)
            } else {
                slot.head_buf.extend_from_slice(rest);
                slot.head.parse(&slot.head_buf, MAX_HEAD)
            };
            let n = match parsed {
                Ok(Some(n)) => n,
                Ok(None) => {
                    if slot.head_buf.is_empty() {
                        slot.head_buf.extend_from_slice(rest);
                    }
                    return Feed::More;
                }
                Err(_) => return Feed::Failed(Failure::Malformed),
            };
            if !slot.head_buf.is_empty() {
                // The head ended inside `rest`, which is the tail of head_buf.
                let before = slot.head_buf.len() - rest.len();
                rest = &rest[n - before..];
                slot.head_buf.clear();
            } else {
                rest = &rest[n..];
            }
            let status = slot.head.status;
            if (100..200).contains(&status) && status != 101 {
                // Interim response (100 Continue, 103 Early Hints): the
                // final one follows.
                continue;
            }
            let framing = match slot.head.framing(is_head) {
                Ok(f) => f,
                Err(_) => return Feed::Failed(Failure::Malformed),
            };
            slot.keep = framing != Framing::Close && status != 101 && slot.head.keep_alive();
            slot.decoder = BodyDecoder::new(framing);
            slot.got_head = true;
            slot.head_seen = Some(HeadSeen {
                is_head,
                status,
                framing,
                keep: slot.keep,
            });
        }
        while !rest.is_empty() && !slot.decoder.is_done() {
            match slot.decoder.decode(rest) {
                Ok((0, _)) => break,
                Ok((c, body)) => {
                    slot.body_bytes += body.len() as u64;
                    rest = &rest[c..];
                }
                Err(_) => return Feed::Failed(Failure::Malformed),
            }
        }
        if slot.decoder.is_done() {
            if !rest.is_empty() {
                // More bytes than the framing announced: the connection's
                // framing is lost, do not reuse it.
                slot.keep = false;
            }
            Feed::Done
        } else {
            Feed::More
        }
    }

    /// HTTP/2: takes frames; the response is the current stream's.
    fn feed_h2(slot: &mut Slot, data: &[u8], now: Instant) -> Feed {
        let Some(h2) = slot.h2.as_mut() else {
            return Feed::Failed(Failure::Malformed);
        };
        slot.resp_bytes += data.len() as u64;
        match h2.feed(data) {
            Ok(()) => {}
            Err(H2Error::Reset) => return Feed::Failed(Failure::Reset),
            Err(H2Error::Refused) => return Feed::Retry,
            Err(H2Error::Protocol) => return Feed::Failed(Failure::Malformed),
        }
        let r = h2.resp;
        if r.status != 0 && !slot.got_head {
            // The first byte is the response's HEADERS (the server's
            // SETTINGS on a new connection are not part of it).
            slot.got_head = true;
            slot.head.status = r.status;
            slot.t_first.get_or_insert(now);
        }
        slot.body_bytes = r.body;
        if r.done {
            slot.keep = !h2.goaway;
            Feed::Done
        } else {
            Feed::More
        }
    }

    fn on_eof(&mut self, s: usize, now: Instant) {
        let slot = &mut self.slots[s];
        if !slot.active() {
            slot.stream = None;
            return;
        }
        if slot.resp_bytes == 0 {
            if slot.reused && !slot.retried {
                self.retry(s, now);
            } else {
                self.fail(s, Failure::Closed, now);
            }
        } else if !slot.got_head || slot.h2.is_some() {
            // Over HTTP/2 only END_STREAM ends a response.
            self.fail(s, Failure::ShortBody, now);
        } else if slot.decoder.eof() {
            slot.keep = false;
            self.complete(s, now);
        } else {
            self.fail(s, Failure::ShortBody, now);
        }
    }

    fn complete(&mut self, s: usize, now: Instant) {
        // The plan outlives the worker: not a borrow of `self`.
        let sh: &'a Shared = self.sh;
        let plan = &sh.plan;
        let spec = &plan.requests[self.slots[s].req];
        let slot = &mut self.slots[s];
        let from = slot.intended.unwrap_or(slot.t_start);
        let latency = us(now.saturating_duration_since(from));
        self.rec.latency.add(latency);
        self.iv.hist.saturating_record(latency.max(1));
        self.iv.moments.add(latency);
        self.iv.responses += 1;
        if self.log.is_some() {
            self.log_line(s, now, LogStatus::Code(self.slots[s].head.status));
        }
        if let (Some(r), Some(every)) = (&sh.running, plan.running_every) {
            // One lock per response, only when asked for: the order of
            // the curve is the order in which responses completed over
            // all threads.
            if let Ok(mut r) = r.lock() {
                r.m.add(latency);
                if r.m.n % every == 0 {
                    r.point(now.saturating_duration_since(sh.start).as_secs_f64());
                }
            }
        }
        let slot = &mut self.slots[s];
        if self.levels_on {
            self.rec
                .levels
                .at(slot.level as usize)
                .add(latency, slot.resp_bytes);
        }
        if plan.groups.len() > 1 {
            self.rec.urls.at(spec.group).add(latency, slot.resp_bytes);
        }
        self.rec
            .connect
            .add(us(slot.t_conn.saturating_duration_since(slot.t_start)));
        self.rec
            .processing
            .add(us(now.saturating_duration_since(slot.t_conn)));
        let first = slot.t_first.unwrap_or(now);
        let written = slot.t_written.unwrap_or(slot.t_conn);
        let first_byte = us(first.saturating_duration_since(written));
        let transfer = us(now.saturating_duration_since(first));
        let request = us(now.saturating_duration_since(written));
        // The connection's spans, when this request opened it.
        let opened = slot.t_tcp.map(|t| {
            let tcp = us(t.saturating_duration_since(slot.t_start));
            let tls = slot.t_tls.map(|h| us(h.saturating_duration_since(t)));
            let ready = slot.t_tls.unwrap_or(t);
            (
                tcp,
                tls,
                us(ready.saturating_duration_since(slot.t_start)),
                us(first.saturating_duration_since(slot.t_start)),
            )
        });
        self.rec.waiting.add(first_byte);
        self.rec.transfer.add(transfer);
        self.rec.request.add(request);
        if let Some((tcp, tls, ready, first)) = opened {
            self.rec.tcp_connect.add(tcp);
            if let Some(tls) = tls {
                self.rec.tls.add(tls);
            }
            self.rec.connection.add(ready);
            self.rec.connection_first_byte.add(first);
        }
        if plan.groups.len() > 1 {
            let u = self.rec.url_phases(spec.group);
            u.first_byte.add(first_byte, 0);
            u.transfer.add(transfer, 0);
            u.request.add(request, 0);
            if let Some((tcp, tls, _, _)) = opened {
                u.connect.add(tcp, 0);
                if let Some(tls) = tls {
                    u.tls.add(tls, 0);
                }
            }
        }
        if let Some(t) = self.rec.total.as_mut() {
            t.add(us(now.saturating_duration_since(slot.t_start)));
        }
        if let Some(cor) = self.rec.corrected.as_mut() {
            cor.add(latency);
            // The requests this client would have sent, at its observed
            // rate, while this one was outstanding: each would have waited
            // for the end of this response. The interval known when this
            // request started is used (its own gap is not counted yet).
            if let Some(interval) = slot.gap_sum_us.checked_div(slot.gaps) {
                let interval = interval.max(1);
                let mut x = latency.saturating_sub(interval);
                // A bound on the back-fill of one response (an hour-long
                // stall at a microsecond's interval would be 3.6e9).
                let mut left = 10_000_000u32;
                while x >= interval && left > 0 {
                    cor.add(x);
                    x -= interval;
                    left -= 1;
                }
            }
        }
        let c = &mut self.rec.counters;
        c.responses += 1;
        c.count_status(slot.head.status);
        c.body_bytes += slot.body_bytes;
        // The first complete response gives the Document Length and the
        // Server Software, with or without -l.
        let first = self.sh.doc_len.load(Relaxed) == u64::MAX
            && self
                .sh
                .doc_len
                .compare_exchange(u64::MAX, slot.body_bytes, Relaxed, Relaxed)
                .is_ok();
        if first {
            if let Ok(mut sv) = self.sh.server.lock() {
                let v = match (&slot.h2, slot.group) {
                    (Some(h), _) => h.server.as_deref(),
                    (None, Some(g)) if self.h3.is_some() => self
                        .h3
                        .as_ref()
                        .and_then(|h| h.conns.get(g))
                        .and_then(|c| c.server.as_deref()),
                    (None, Some(g)) => self.groups[g].h2.server.as_deref(),
                    (None, None) => slot.head.header("server"),
                };
                *sv = Some(
                    v.map(|v| String::from_utf8_lossy(v).into_owned())
                        .unwrap_or_default(),
                );
            }
        }
        // A templated request differs from client to client (a user's
        // own page): its length is not checked.
        if !plan.variable_length && spec.template.is_none() {
            // ab's Length check, per URL: each request of a mix or tree
            // is compared with the first response to that same request.
            let len = &self.sh.doc_lens[slot.req];
            let differs = match len.compare_exchange(u64::MAX, slot.body_bytes, Relaxed, Relaxed) {
                Ok(_) => false,
                Err(l) => l != slot.body_bytes,
            };
            if differs {
                c.errors.length_mismatch += 1;
                self.iv.errors += 1;
                self.sh.count_error(now);
            }
        }
        let reuse = slot.keep && plan.keep_alive && slot.written == slot.req_len;
        if reuse {
            c.keep_alive += 1;
        } else {
            slot.stream = None;
        }
        if let Some(x) = plan.abort.latency_over {
            if latency > us(x) {
                self.sh.abort(
                    format!(
                        "a response took {:.3} s (limit {:.3} s)",
                        latency as f64 / 1e6,
                        x.as_secs_f64()
                    ),
                    now,
                );
            }
        }
        self.last_done = Some(now);
        self.account(now);
        self.busy -= 1;
        if self.sh.plan.open_loop() {
            self.sh.in_flight.fetch_sub(1, Relaxed);
        }
        self.after(s, now, false);
    }

    fn fail(&mut self, s: usize, f: Failure, now: Instant) {
        if let (Some(g), true) = (self.slots[s].group, self.h3.is_some()) {
            self.h3_forget(s, g);
        } else if let Some(g) = self.slots[s].group {
            let grp = &mut self.groups[g];
            grp.h2.forget(s);
            grp.waiting.retain(|&w| w != s);
            grp.blocked.retain(|&w| w != s);
        }
        if self.log.is_some() {
            self.log_line(s, now, LogStatus::Failed(f));
        }
        self.rec.counters.fail(f);
        if self.levels_on {
            self.rec.levels.at(self.slots[s].level as usize).errors += 1;
        }
        if self.sh.plan.groups.len() > 1 {
            let g = self.sh.plan.requests[self.slots[s].req].group;
            self.rec.urls.at(g).errors += 1;
        }
        self.iv.errors += 1;
        self.sh.count_error(now);
        let slot = &mut self.slots[s];
        slot.stream = None;
        self.last_done = Some(now);
        self.account(now);
        self.busy -= 1;
        if self.sh.plan.open_loop() {
            self.sh.in_flight.fetch_sub(1, Relaxed);
        }
        let backoff = matches!(f, Failure::ConnectRefused | Failure::Connect | Failure::Tls);
        self.after(s, now, backoff);
    }

    /// Appends the log line of slot `s`'s request, which ended at `now`:
    /// `start_s,latency_ms,status,bytes,client,connect_ms,tls_ms,
    /// first_byte_ms,transfer_ms,url`, times from the run's start in
    /// microseconds (formatted as integers: no float formatting per
    /// request); a phase the request did not have is empty.
    fn log_line(&mut self, s: usize, now: Instant, status: LogStatus) {
        use crate::plan::push_u64;
        let Some(buf) = self.log.as_mut() else {
            return;
        };
        let slot = &self.slots[s];
        let from = slot.intended.unwrap_or(slot.t_start);
        let start = us(from.saturating_duration_since(self.sh.start));
        let lat = us(now.saturating_duration_since(from));
        // "S.UUUUUU,M.UUU,": integer digits, a fixed-width fraction.
        let frac = |buf: &mut Vec<u8>, x: u64, unit: u64, width: usize| {
            push_u64(buf, x / unit);
            buf.push(b'.');
            let f = x % unit;
            let digits = if f == 0 { 1 } else { f.ilog10() as usize + 1 };
            buf.extend(std::iter::repeat_n(b'0', width - digits));
            push_u64(buf, f);
            buf.push(b',');
        };
        frac(buf, start, 1_000_000, 6);
        frac(buf, lat, 1000, 3);
        match status {
            LogStatus::Code(c) => push_u64(buf, u64::from(c)),
            LogStatus::Failed(f) => buf.extend_from_slice(f.name().as_bytes()),
        }
        buf.push(b',');
        push_u64(buf, slot.resp_bytes);
        buf.push(b',');
        push_u64(buf, slot.client);
        buf.push(b',');
        let span = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(a), Some(b)) => Some(us(b.saturating_duration_since(a))),
            _ => None,
        };
        let done = matches!(status, LogStatus::Code(_));
        let phases = [
            span(Some(slot.t_start), slot.t_tcp),
            span(slot.t_tcp, slot.t_tls),
            span(slot.t_written, slot.t_first),
            span(slot.t_first, done.then_some(now)),
        ];
        for p in phases {
            match p {
                Some(x) => frac(buf, x, 1000, 3),
                None => buf.push(b','),
            }
        }
        // The request target as sent (a template's, rendered): between the
        // request line's two spaces.
        let spec = &self.sh.plan.requests[slot.req];
        let bytes: &[u8] = match (&spec.template, &slot.rendered) {
            (Some(_), Some(r)) if spec.h2.is_some() || spec.h3.is_some() => &r.text,
            (Some(_), _) => &slot.wbuf,
            (None, _) => &spec.bytes,
        };
        let target = bytes
            .split(|&b| b == b' ')
            .nth(1)
            .unwrap_or(spec.path.as_bytes());
        if target.iter().any(|&b| b == b',' || b == b'"') {
            buf.push(b'"');
            for &b in target {
                if b == b'"' {
                    buf.push(b'"');
                }
                buf.push(b);
            }
            buf.push(b'"');
        } else {
            buf.extend_from_slice(target);
        }
        buf.push(b'\n');
        if buf.len() >= LOG_CHUNK {
            self.flush_log();
        }
    }

    /// Writes this thread's log lines (whole lines, one write).
    fn flush_log(&mut self) {
        use std::io::Write as _;
        let (Some(buf), Some(file)) = (self.log.as_mut(), self.sh.log.as_ref()) else {
            return;
        };
        if buf.is_empty() {
            return;
        }
        let r = match file.lock() {
            Ok(mut f) => f.write_all(buf),
            Err(_) => Ok(()),
        };
        buf.clear();
        if let Err(e) = r {
            if let Ok(mut le) = self.sh.log_error.lock() {
                le.get_or_insert_with(|| e.to_string());
            }
            // Stop logging: the run goes on, the error is reported at
            // its end.
            self.log = None;
        }
    }

    /// Responses by status code since the last call: the difference of the
    /// run's counts, once a second, rather than a count per response.
    fn status_since_last(&mut self) -> Vec<(u16, u64)> {
        let now = &self.rec.counters.status;
        if self.status_seen.len() != now.len() {
            self.status_seen = vec![0; now.len()];
        }
        let mut out = Vec::new();
        for (code, (n, seen)) in now.iter().zip(self.status_seen.iter_mut()).enumerate() {
            if *n != *seen {
                // Index 0 holds the codes outside 100..=599.
                out.push((code as u16, *n - *seen));
                *seen = *n;
            }
        }
        out
    }

    /// The request of slot `s` ended: start the next one, think, or leave.
    fn after(&mut self, s: usize, now: Instant, backoff: bool) {
        let plan = &self.sh.plan;
        let slot = &mut self.slots[s];
        slot.phase = Phase::Idle;
        if plan.open_loop() {
            if backoff {
                self.set_timer(s, now + CONNECT_BACKOFF, Phase::Backoff);
            } else if let Some(t) = self.next_arrival(now) {
                self.begin(s, now, Some(t));
            } else {
                self.idle.push(s);
            }
            return;
        }
        slot.done_reqs += 1;
        if plan.per_client.is_some_and(|n| slot.done_reqs >= n) || self.sh.stopping() {
            self.finish_client(s, now);
            return;
        }
        let mut think = plan.think.sample(&mut slot.rng);
        if backoff {
            think = think.max(CONNECT_BACKOFF);
        }
        if think.is_zero() {
            self.begin_closed(s, now);
        } else {
            self.set_timer(s, now + think, Phase::Thinking);
        }
    }

    fn set_timer(&mut self, s: usize, at: Instant, phase: Phase) {
        let slot = &mut self.slots[s];
        slot.phase = phase;
        slot.timer_gen = slot.timer_gen.wrapping_add(1);
        self.timers.push(Reverse((at, s, slot.timer_gen)));
    }

    fn on_timer(&mut self, s: usize, now: Instant) {
        match self.slots[s].phase {
            Phase::Thinking => self.begin_closed(s, now),
            Phase::Backoff if self.sh.plan.open_loop() => {
                self.slots[s].phase = Phase::Idle;
                self.idle.push(s);
            }
            Phase::Backoff => self.begin_closed(s, now),
            _ => {}
        }
    }

    /// Per-request timeouts and the latency abort rule for requests still
    /// waiting.
    fn sweep(&mut self, now: Instant) {
        let timeout = self.sh.plan.timeout;
        let limit = self.sh.plan.abort.latency_over;
        for s in 0..self.slots.len() {
            let slot = &self.slots[s];
            if !slot.active() {
                continue;
            }
            if let Some(x) = limit {
                let from = slot.intended.unwrap_or(slot.t_start);
                if now.saturating_duration_since(from) > x {
                    self.sh.abort(
                        format!("a request waited over {:.3} s", x.as_secs_f64()),
                        now,
                    );
                }
            }
            if now.saturating_duration_since(slot.t_start) >= timeout {
                // A connect still pending at the timeout (a dropped SYN, a
                // full accept queue) never reached the server: a connect
                // error, not a response that did not come.
                let f = if slot.phase == Phase::Connecting {
                    Failure::Connect
                } else {
                    Failure::Timeout
                };
                self.fail(s, f, now);
            }
        }
    }

    /// The run ends: count what is still in flight, close everything.
    fn stop(&mut self, end: Instant) {
        for g in &mut self.groups {
            g.conn = None;
        }
        self.h3_stop();
        for slot in &mut self.slots {
            if slot.active() {
                self.rec.counters.in_flight_at_end += 1;
            }
            slot.stream = None;
        }
        if self.sh.plan.open_loop() && !self.no_more_tickets {
            let due = self.due_before(end);
            let mut missed = due.saturating_sub(self.sched_next);
            if let Some(n) = self.sh.plan.limit {
                let left = n.saturating_sub(self.sh.issued.load(Relaxed));
                missed = missed.min(left);
            }
            self.rec.counters.not_sent += missed;
        }
    }

    fn flush_interval(&mut self, now: Instant) {
        while now >= self.next_sec {
            // The level's mean over the second that ends.
            self.account(self.next_sec);
            let active = self.sec_area.pop_front().unwrap_or(0.0);
            let next = Interval {
                thread: self.id,
                sec: self.iv.sec + 1,
                length: Duration::from_secs(1),
                hist: self.iv.hist.clone(),
                moments: Moments::default(),
                responses: 0,
                errors: 0,
                bytes: 0,
                active: 0.0,
                status: Vec::new(),
            };
            let mut done = std::mem::replace(&mut self.iv, next);
            self.iv.hist.reset();
            done.active = active;
            done.status = self.status_since_last();
            let _ = self.tx.send(Msg::Interval(Box::new(done)));
            self.next_sec += Duration::from_secs(1);
        }
    }

    fn flush_partial(&mut self, end: Instant) {
        self.flush_interval(end);
        let start = self.next_sec - Duration::from_secs(1);
        let length = end.saturating_duration_since(start);
        // A sliver of a second with nothing in it (a timed run ends on a
        // second boundary) would only add an empty point to the timeline.
        if length < Duration::from_millis(5) && self.iv.responses == 0 && self.iv.errors == 0 {
            return;
        }
        let mut iv = std::mem::replace(
            &mut self.iv,
            Interval {
                thread: self.id,
                sec: 0,
                length: Duration::ZERO,
                hist: new_hist(),
                moments: Moments::default(),
                responses: 0,
                errors: 0,
                bytes: 0,
                active: 0.0,
                status: Vec::new(),
            },
        );
        iv.length = length;
        iv.status = self.status_since_last();
        // The level's mean over this last part of a second.
        self.account(end);
        iv.active = self.sec_area.pop_front().unwrap_or(0.0) / length.as_secs_f64().max(1e-9);
        let _ = self.tx.send(Msg::Interval(Box::new(iv)));
    }
}

/// Marks a group's token (the low 32 bits of a slot's are its index,
/// below 2^31).
const GROUP_BIT: usize = 1 << 31;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupState {
    Closed,
    Connecting,
    Handshaking,
    Ready,
}

/// An HTTP/2 connection carrying the requests of several clients at once
/// (`--max-concurrent-streams N`, h2load's `-m N`): each client is one
/// stream at a time, and N clients share the connection.
struct Group {
    conn: Option<Conn>,
    h2: H2Conn,
    gen: u32,
    state: GroupState,
    /// Clients whose request waits for the connection.
    waiting: Vec<usize>,
    /// Clients whose request waits for a stream: the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS is reached (RFC 9113 §5.1.2).
    blocked: std::collections::VecDeque<usize>,
    /// The client whose request opened the connection (its request has
    /// the connect and TLS phases).
    opener: Option<usize>,
    out: Vec<u8>,
    out_pos: usize,
    queued: bool,
}

impl Group {
    fn new() -> Group {
        Group {
            conn: None,
            h2: H2Conn::new(0),
            gen: 0,
            state: GroupState::Closed,
            waiting: Vec::new(),
            blocked: std::collections::VecDeque::new(),
            opener: None,
            out: Vec::new(),
            out_pos: 0,
            queued: false,
        }
    }
}

impl Worker<'_> {
    /// With several streams per connection, this thread's `i`-th client
    /// is a stream of connection `i / N`.
    fn join_group(&mut self, s: usize, i: u64) {
        let m = u64::from(self.sh.plan.streams);
        if m < 2 && self.h3.is_none() {
            return;
        }
        let g = (i / m) as usize;
        while self.groups.len() <= g {
            self.groups.push(Group::new());
        }
        if let Some(h) = self.h3.as_mut() {
            h.ensure(g);
        }
        self.slots[s].group = Some(g);
    }

    fn group_begin(&mut self, s: usize, g: usize, now: Instant) {
        let slot = &mut self.slots[s];
        Self::reset_response(slot);
        slot.reused = self.groups[g].state == GroupState::Ready;
        match self.groups[g].state {
            GroupState::Ready => self.group_stream_or_wait(s, g, now),
            GroupState::Closed => {
                slot.phase = Phase::Connecting;
                slot.t_conn = now;
                self.groups[g].waiting.push(s);
                self.group_connect(g, s, now);
            }
            GroupState::Connecting | GroupState::Handshaking => {
                slot.phase = Phase::Connecting;
                self.groups[g].waiting.push(s);
            }
        }
    }

    fn group_connect(&mut self, g: usize, opener: usize, now: Instant) {
        self.rec.counters.connections += 1;
        let target = &self.sh.plan.target;
        let grp = &mut self.groups[g];
        grp.gen = grp.gen.wrapping_add(1);
        grp.h2 = H2Conn::new(grp.gen);
        grp.out.clear();
        grp.out_pos = 0;
        grp.opener = Some(opener);
        let token = Token((grp.gen as usize) << 32 | GROUP_BIT | g);
        let r = TcpStream::connect(target.addrs[0]).and_then(|mut stream| {
            self.poll.registry().register(
                &mut stream,
                token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            Conn::new(stream, target.tls.as_ref())
        });
        match r {
            Ok(c) => {
                grp.conn = Some(c);
                grp.state = GroupState::Connecting;
            }
            Err(e) => self.group_fail(g, classify_connect(&e), now),
        }
    }

    /// The connection failed or closed: every request on it or waiting
    /// for it fails; the next request opens a new one.
    fn group_fail(&mut self, g: usize, f: Failure, now: Instant) {
        let grp = &mut self.groups[g];
        // After the server's GOAWAY (a connection's request quota, as
        // nginx's `keepalive_requests`), the requests that waited for a
        // stream were never sent: they go on a new connection (RFC 9113
        // §6.8).
        let again: Vec<usize> = if grp.h2.goaway && grp.state == GroupState::Ready {
            grp.blocked.drain(..).collect()
        } else {
            Vec::new()
        };
        grp.conn = None;
        grp.state = GroupState::Closed;
        grp.gen = grp.gen.wrapping_add(1);
        grp.out.clear();
        grp.out_pos = 0;
        let mut victims: Vec<usize> = grp.h2.streams.iter().map(|st| st.tag).collect();
        victims.append(&mut grp.waiting);
        victims.extend(grp.blocked.drain(..));
        grp.h2 = H2Conn::new(grp.gen);
        for s in victims {
            if self.slots[s].active() && self.slots[s].group == Some(g) {
                self.fail(s, f, now);
            }
        }
        for s in again {
            if self.slots[s].active() && self.slots[s].group == Some(g) {
                self.rec.counters.retries += 1;
                // Its clock keeps running, unless it opens the new
                // connection (whose connect phase starts now).
                let t = self.slots[s].t_start;
                self.group_begin(s, g, now);
                if self.groups[g].opener != Some(s) {
                    self.slots[s].t_start = t;
                }
            }
        }
    }

    /// Opens slot `s`'s stream, or queues it while the server's stream
    /// limit is reached (its clock runs from now all the same).
    fn group_stream_or_wait(&mut self, s: usize, g: usize, now: Instant) {
        let grp = &mut self.groups[g];
        if grp.h2.can_open() && grp.blocked.is_empty() {
            return self.group_open_stream(s, g, now, false);
        }
        grp.blocked.push_back(s);
        let slot = &mut self.slots[s];
        slot.phase = Phase::Writing;
        if slot.reused {
            slot.t_start = now;
            slot.t_conn = now;
        }
    }

    /// `waited`: the request waited in [`Group::blocked`] and its clock
    /// started then.
    fn group_open_stream(&mut self, s: usize, g: usize, now: Instant, waited: bool) {
        let sh: &Shared = self.sh;
        let Some(req) = h2_request(
            &sh.plan.requests[self.slots[s].req],
            &self.slots[s].rendered,
        ) else {
            return;
        };
        let grp = &mut self.groups[g];
        let before = grp.out.len();
        grp.h2.open(req, &mut grp.out, s);
        let sent = (grp.out.len() - before) as u64;
        if !grp.queued {
            grp.queued = true;
            self.pending_groups.push(g);
        }
        let slot = &mut self.slots[s];
        slot.phase = Phase::Reading;
        slot.req_len = 1;
        slot.written = 1;
        if slot.reused && !waited {
            slot.t_start = now;
            slot.t_conn = now;
        }
        slot.t_written = Some(now);
        self.rec.counters.bytes_sent += sent;
        self.rec.counters.body_sent += slot.body_len as u64;
    }

    fn group_write(&mut self, g: usize, now: Instant) {
        let grp = &mut self.groups[g];
        if grp.state != GroupState::Ready {
            return;
        }
        let Some(conn) = grp.conn.as_mut() else {
            return;
        };
        grp.out.append(&mut grp.h2.out);
        while grp.out_pos < grp.out.len() {
            match conn.write(&grp.out[grp.out_pos..]) {
                Ok(0) => return self.group_fail(g, Failure::Reset, now),
                Ok(n) => grp.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.group_fail(g, Failure::Reset, now),
            }
        }
        match conn.flushed() {
            Ok(_) => {}
            Err(_) => return self.group_fail(g, Failure::Reset, now),
        }
        grp.out.clear();
        grp.out_pos = 0;
    }

    fn on_group(&mut self, g: usize, ev: &mio::event::Event, now: Instant) {
        match self.groups[g].state {
            GroupState::Closed => {}
            GroupState::Connecting => {
                let Some(conn) = self.groups[g].conn.as_ref() else {
                    return;
                };
                let sock = conn.socket();
                match sock.take_error() {
                    Ok(Some(e)) | Err(e) => return self.group_fail(g, classify_connect(&e), now),
                    Ok(None) => {}
                }
                match sock.peer_addr() {
                    Ok(_) => {
                        let _ = sock.set_nodelay(true);
                        if let Some(o) = self.groups[g].opener {
                            self.slots[o].t_tcp = Some(now);
                        }
                        if conn.is_tls() {
                            self.groups[g].state = GroupState::Handshaking;
                            self.group_handshake(g, now);
                        } else {
                            self.group_ready(g, now);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => {}
                    Err(e) => self.group_fail(g, classify_connect(&e), now),
                }
            }
            GroupState::Handshaking => self.group_handshake(g, now),
            GroupState::Ready => {
                if ev.is_writable() {
                    self.group_write(g, now);
                }
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.group_read(g, now);
                }
            }
        }
    }

    fn group_handshake(&mut self, g: usize, now: Instant) {
        let Some(conn) = self.groups[g].conn.as_mut() else {
            return;
        };
        match conn.handshake() {
            Handshake::Pending => {}
            Handshake::Done => {
                let now = Instant::now();
                self.rec.counters.tls_handshakes += 1;
                if conn.resumed() {
                    self.rec.counters.tls_resumed += 1;
                }
                if !conn.alpn_is(b"h2") {
                    if let Ok(mut e) = self.sh.tls_error.lock() {
                        e.get_or_insert_with(|| {
                            "the server did not choose h2 by ALPN (RFC 9113 §3.2)".into()
                        });
                    }
                    self.sh.stop.store(true, Relaxed);
                    return self.group_fail(g, Failure::Tls, now);
                }
                if let Ok(mut p) = self.sh.tls_params.lock() {
                    if p.is_none() {
                        *p = conn.tls_params();
                    }
                }
                if let Some(o) = self.groups[g].opener {
                    self.slots[o].t_tls = Some(now);
                    self.slots[o].t_conn = now;
                }
                self.group_ready(g, now);
            }
            Handshake::Failed(f) => {
                if let Ok(mut e) = self.sh.tls_error.lock() {
                    e.get_or_insert_with(|| f.message.clone());
                }
                if f.fatal {
                    self.sh.stop.store(true, Relaxed);
                }
                self.group_fail(g, Failure::Tls, now);
            }
        }
    }

    fn group_ready(&mut self, g: usize, now: Instant) {
        self.groups[g].state = GroupState::Ready;
        let waiting = std::mem::take(&mut self.groups[g].waiting);
        for s in waiting {
            if self.slots[s].phase == Phase::Connecting && self.slots[s].group == Some(g) {
                self.group_stream_or_wait(s, g, now);
            }
        }
        self.group_write(g, now);
    }

    /// Opens the streams that waited for the server's stream limit, as
    /// far as it now allows (streams ended, or a SETTINGS raised it).
    fn group_unblock(&mut self, g: usize, gen: u32, now: Instant) {
        let grp = &mut self.groups[g];
        if grp.gen != gen {
            return;
        }
        let m = grp.h2.min_max_streams;
        if u64::from(m) < u64::from(self.sh.plan.streams) {
            let c = &mut self.rec.counters;
            c.server_max_streams = c.server_max_streams.min(u64::from(m));
        }
        while self.groups[g].h2.can_open() {
            let Some(s) = self.groups[g].blocked.pop_front() else {
                break;
            };
            if self.slots[s].active() && self.slots[s].group == Some(g) {
                self.group_open_stream(s, g, now, true);
            }
        }
        // After GOAWAY, once its last stream ended, the connection is
        // done: close it, and what waits goes on a new one.
        let grp = &self.groups[g];
        if grp.h2.goaway && grp.h2.streams.is_empty() && !grp.blocked.is_empty() {
            self.group_fail(g, Failure::Closed, now);
        }
    }

    fn group_read(&mut self, g: usize, now: Instant) {
        let mut buf = std::mem::take(&mut self.rbuf);
        let gen = self.groups[g].gen;
        if let Some(c) = self.groups[g].conn.as_mut() {
            c.readable();
        }
        loop {
            let grp = &mut self.groups[g];
            if grp.gen != gen {
                break;
            }
            let Some(conn) = grp.conn.as_mut() else {
                break;
            };
            match conn.read(&mut buf) {
                Ok(0) => {
                    self.group_fail(g, Failure::Closed, now);
                    break;
                }
                Ok(n) => {
                    self.rec.counters.bytes_read += n as u64;
                    self.iv.bytes += n as u64;
                    if let Err(e) = grp.h2.feed(&buf[..n]) {
                        let f = match e {
                            H2Error::Reset => Failure::Reset,
                            H2Error::Refused => Failure::Closed,
                            H2Error::Protocol => Failure::Malformed,
                        };
                        self.group_fail(g, f, now);
                        break;
                    }
                    // Control frames owed (a SETTINGS ACK above all) go
                    // before the streams this read lets open.
                    grp.out.append(&mut grp.h2.out);
                    // The first byte of each response: its HEADERS.
                    for st in &grp.h2.streams {
                        let slot = &mut self.slots[st.tag];
                        if st.resp.status != 0 && slot.t_first.is_none() {
                            slot.t_first = Some(now);
                        }
                    }
                    let mut ended = std::mem::take(&mut self.ended);
                    grp.h2.take_ended(&mut ended);
                    for st in ended.drain(..) {
                        let s = st.tag;
                        if self.slots[s].group != Some(g) || !self.slots[s].active() {
                            continue;
                        }
                        match st.err {
                            Some(H2Error::Reset) => self.fail(s, Failure::Reset, now),
                            Some(H2Error::Refused) => {
                                // Not processed (REFUSED_STREAM, or past a
                                // GOAWAY's last stream): it waits to be
                                // sent again, first in line.
                                self.rec.counters.retries += 1;
                                self.slots[s].phase = Phase::Writing;
                                self.groups[g].blocked.push_front(s);
                            }
                            Some(_) => self.fail(s, Failure::Closed, now),
                            None => {
                                let slot = &mut self.slots[s];
                                slot.got_head = true;
                                slot.head.status = st.resp.status;
                                slot.body_bytes = st.resp.body;
                                slot.resp_bytes = st.resp.body;
                                slot.t_first.get_or_insert(now);
                                slot.keep = true;
                                self.complete(s, now);
                            }
                        }
                    }
                    self.ended = ended;
                    self.group_unblock(g, gen, now);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.group_fail(g, Failure::Reset, now);
                    break;
                }
            }
        }
        self.rbuf = buf;
        // Control frames owed (SETTINGS and PING ACKs, window updates).
        if self.groups[g].gen == gen && !self.groups[g].h2.out.is_empty() {
            self.group_write(g, now);
        }
    }
}

/// Whether more requests may start (for the collector's progress line).
pub fn tickets_left(sh: &Shared) -> bool {
    sh.tickets_left()
}
