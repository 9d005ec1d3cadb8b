//! One HTTP/2 connection (after ALPN `h2`, or with prior knowledge over
//! cleartext), driven with Stoa's sans-IO codec `stoa_h2`: this task
//! reads, hands the bytes to the codec, acts on its events, and writes
//! the codec's output once per turn of its loop. Each request is routed
//! and run through an [`Exchange`] over [`H2Stream`], exactly as an
//! HTTP/1 request would be; its future is polled at once, in this task,
//! and becomes a task of its own only if it has to wait (a static file
//! or a cached response never does). See docs/ARCHITECTURE.md,
//! "Lifecycle of an HTTP/2 request".

use crate::config::Runtime;
use crate::exchange::{Edge, Exchange};
use crate::local::Proto;
use crate::local::Worker;
use crate::proto::h2::{H2Stream, Shared, Slot};
use crate::proto::stream::{Rewind, Stream};
use crate::route;
use bytes::BytesMut;
use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::io::IoSlice;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use stoa_h1::{Framing, Method, RequestHead, Version};
use stoa_h2::{Conn, Event, Reason};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// How long a connection that was told to go away with an error (GOAWAY)
/// may take to end before it is dropped: a client that stops reading
/// cannot even be sent its GOAWAY.
const GOAWAY_GRACE: Duration = Duration::from_secs(2);

/// Bytes asked of the socket per read.
const READ_SIZE: usize = 16 * 1024;

/// Pieces of output given to one vectored write (frames, and the shared
/// bodies between them: ten cached files' responses are 21).
const WRITE_SLICES: usize = 64;

/// Keeps the connection's count of live stream handlers, and the
/// worker's.
struct Live {
    count: Rc<Cell<usize>>,
    worker: Rc<Worker>,
    tls: bool,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.count.set(self.count.get() - 1);
        if let Some(s) = self.worker.stats() {
            s.stream_closed(self.tls);
        }
    }
}

/// Counts the connection as open for its protocol until it ends (not
/// when it parks: it is still open).
struct Open {
    worker: Rc<Worker>,
    proto: Proto,
    parked: bool,
}

impl Drop for Open {
    fn drop(&mut self) {
        if self.parked {
            return;
        }
        if let Some(s) = self.worker.stats() {
            s.closed(self.proto);
        }
    }
}

/// An idle connection's state while it waits in the worker's lot
/// (`conn::park`) instead of in a task: its socket or TLS stream, the
/// codec (HPACK table, windows, settings, stream counts; its buffers
/// given back) and what the loop needs to start again. About a kilobyte
/// (plus the TLS session) where a waiting task held its future (~5.6
/// KB), task cell and buffers.
pub(crate) struct Parked {
    io: ParkedIo,
    codec: Conn,
    max_output: usize,
    max_live: usize,
    local: Option<SocketAddr>,
    idle_until: Instant,
}

/// A parked connection's transport.
enum ParkedIo {
    /// Out of tokio (its registration freed); the lot's set only.
    Plain(std::net::TcpStream),
    /// Still registered with tokio: `tokio_rustls` cannot rebuild a
    /// stream from its socket and session, so the socket stays in its
    /// stream (and the lot watches the same descriptor too).
    Tls(Box<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>),
}

impl Parked {
    /// The descriptor the lot watches.
    pub(crate) fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match &self.io {
            ParkedIo::Plain(s) => s.as_raw_fd(),
            ParkedIo::Tls(t) => t.get_ref().0.as_raw_fd(),
        }
    }

    /// What the status page counts it as.
    pub(crate) fn proto(&self) -> Proto {
        match self.io {
            ParkedIo::Plain(_) => Proto::H2c,
            ParkedIo::Tls(_) => Proto::H2,
        }
    }
}

/// Why the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Everything said and written (after GOAWAY, or the client's own).
    Done,
    /// Idle for `park::PARK_AFTER` with nothing in progress: the
    /// connection leaves its task for the lot.
    Park,
    /// The client closed its side.
    Closed,
    /// The socket failed.
    Gone,
    /// A deadline passed: no GOAWAY reply, no preface, or a client that
    /// does not read.
    Late,
}

/// What starts a stream's handler: [`stream`]'s future, `F` (a type
/// the compiler names, hence the parameter).
type MakeStream<F> = fn(H2Stream, RequestHead, Rc<Worker>, Arc<Runtime>, Live) -> F;

/// The connection's state, outside the codec (which [`Shared`] holds).
struct Driver<F> {
    io: Rewind,
    rbuf: BytesMut,
    shared: Rc<RefCell<Shared>>,
    /// The codec stopped taking frames (too much output waiting): what
    /// `rbuf` holds is given to it again once the output is written.
    input_held: bool,
    live: Rc<Cell<usize>>,
    /// Streams started since the idle timer last fired.
    busy: bool,
    worker: Rc<Worker>,
    rt: Arc<Runtime>,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    tls: Option<(&'static str, &'static str)>,
    /// More live handlers than this: streams are opened and cancelled
    /// faster than they end (Rapid Reset).
    max_live: usize,
    /// No more reading: the client closed its side, the connection
    /// failed, or it is being closed for an attack.
    read_closed: bool,
    /// GOAWAY went (or is queued): no new streams; the loop ends when
    /// the open ones did.
    closing: bool,
    /// Dropped by then (told to go away with an error, or no preface).
    gone_by: Option<Instant>,
    /// When the output last could not be written at once: a client that
    /// does not read for `send_timeout` is dropped.
    stalled_since: Option<Instant>,
    idle_until: Instant,
    /// Requests waiting to be started, reused.
    starts: Vec<(u32, Box<stoa_h2::Request>, bool)>,
    /// TLS: the session holds written bytes not yet on the socket.
    unflushed: bool,
    make: MakeStream<F>,
    /// The box of the last handler that completed at once, reused for
    /// the next (a future of about 2 KB: an allocation and a free per
    /// request saved).
    spare: Option<Pin<Box<F>>>,
    /// Idle since about then minus `park::PARK_AFTER`: the buffers kept
    /// for the next request are given back at that time if the
    /// connection is still idle (as an HTTP/1 connection parks).
    shrink_at: Option<Instant>,
    /// The buffers were given back and no stream started since.
    shrunk: bool,
    /// A stream started since `shrink_at` was set: the connection was not
    /// idle for the whole delay, so it neither parks nor shrinks then (a
    /// client sending a request every 100 ms must not park between
    /// them: each park and resume costs three `epoll_ctl`s and a task).
    stirred: bool,
    /// A stream started on this connection (since it was resumed).
    started_one: bool,
    /// More than one did.
    repeat: bool,
}

/// Serves an HTTP/2 connection until the client or the server ends it,
/// or it parks (true: the lot holds it, and its count, now).
pub async fn serve(io: Rewind, peer: SocketAddr, worker: Rc<Worker>, rt: Arc<Runtime>) -> bool {
    let local = io.inner.local_addr().ok();
    let raw = std::os::fd::AsRawFd::as_raw_fd(io.inner.tcp());
    let tls = io.inner.tls_info();
    let _ = io.inner.set_nodelay(true);
    let l = &rt.http2;
    let cfg = stoa_h2::Config {
        header_table_size: 4096,
        max_concurrent_streams: l.max_concurrent_streams,
        initial_window_size: l.initial_window_size,
        initial_connection_window_size: l.initial_connection_window_size,
        max_frame_size: l.max_frame_size,
        max_header_list_size: l.max_header_list_size,
        enable_connect_protocol: false,
        max_pending_accept_reset_streams: l.max_pending_accept_reset_streams,
        max_local_error_reset_streams: l.max_local_error_reset_streams,
        max_control_frames: l.max_control_frames,
    };
    let is_tls = tls.is_some();
    let proto = if is_tls { Proto::H2 } else { Proto::H2c };
    if let Some(s) = worker.stats() {
        s.opened(proto);
    }
    let open = Open {
        worker: worker.clone(),
        proto,
        parked: false,
    };
    let mut codec = Conn::new(&cfg);
    if is_tls {
        // A DATA frame and its 9-byte header fill one TLS record (16 KiB
        // of plaintext) instead of straddling two.
        codec.set_max_data_frame(16_384 - 9);
    }
    let shared = Shared::new(codec, l.max_send_buffer);
    let max_live = 2 * l.max_concurrent_streams as usize;
    // The preface and the first frames are due within the header
    // timeout, as a request head is.
    let idle_until = Instant::now() + rt.limits.header_timeout;
    let d = driver(
        io, shared, worker, rt, peer, local, tls, max_live, idle_until,
    );
    run(d, open, raw).await
}

/// A parked connection (`conn::park`) comes back: the client sent
/// something, its keep-alive deadline passed (it says GOAWAY) or the
/// worker stops (the same). Served as before it parked; true when it
/// parks again.
pub(crate) async fn resume(
    state: Box<Parked>,
    peer: SocketAddr,
    worker: Rc<Worker>,
    rt: Arc<Runtime>,
) -> bool {
    let raw = state.fd();
    let open = Open {
        worker: worker.clone(),
        proto: state.proto(),
        parked: false,
    };
    let Parked {
        io,
        codec,
        max_output,
        max_live,
        local,
        idle_until,
    } = *state;
    let stream = match io {
        // Back into tokio: a new registration.
        ParkedIo::Plain(s) => match tokio::net::TcpStream::from_std(s) {
            Ok(tcp) => Stream::Plain(tcp),
            Err(e) => {
                tracing::debug!("h2 {peer}: back from the lot: {e}");
                return false;
            }
        },
        ParkedIo::Tls(t) => Stream::Tls(t),
    };
    let tls = stream.tls_info();
    let io = Rewind::new(Vec::new(), stream);
    let shared = Shared::new(codec, max_output);
    let d = driver(
        io, shared, worker, rt, peer, local, tls, max_live, idle_until,
    );
    run(d, open, raw).await
}

/// The loop's state for a connection starting or coming back.
#[allow(clippy::too_many_arguments)]
fn driver(
    io: Rewind,
    shared: Shared,
    worker: Rc<Worker>,
    rt: Arc<Runtime>,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    tls: Option<(&'static str, &'static str)>,
    max_live: usize,
    idle_until: Instant,
) -> Driver<impl Future<Output = ()> + 'static> {
    let mut shared = shared;
    // Read from the TLS session again when a parked connection comes
    // back: the parked state keeps the session, not this copy.
    shared.client_cert = io.inner.client_cert().map(Arc::new);
    Driver {
        io,
        rbuf: BytesMut::new(),
        shrink_at: None,
        shrunk: false,
        stirred: false,
        started_one: false,
        repeat: false,
        shared: Rc::new(RefCell::new(shared)),
        input_held: false,
        live: Rc::new(Cell::new(0)),
        busy: false,
        worker,
        max_live,
        rt,
        peer,
        local,
        tls,
        read_closed: false,
        closing: false,
        gone_by: None,
        stalled_since: None,
        idle_until,
        starts: Vec::new(),
        unflushed: false,
        make: stream,
        spare: None,
    }
}

/// Runs the connection: until it ends (then it closes) or parks (true).
async fn run<F: Future<Output = ()> + 'static>(
    mut d: Driver<F>,
    mut open: Open,
    raw: std::os::fd::RawFd,
) -> bool {
    let (worker, peer) = (d.worker.clone(), d.peer);
    let mut shutdown = worker.shutdown.clone();
    let stop = async move {
        while !*shutdown.borrow_and_update() {
            if shutdown.changed().await.is_err() {
                break;
            }
        }
    };
    let mut stop = std::pin::pin!(stop);
    let mut timer = Box::pin(tokio::time::sleep_until(d.idle_until));
    let mut timer_at = d.idle_until;
    let mut stopped = false;
    let end = poll_fn(|cx| {
        loop {
            if !stopped && stop.as_mut().poll(cx).is_ready() {
                // SIGQUIT/SIGTERM: GOAWAY, streams in progress finish, no
                // new ones.
                stopped = true;
                d.go_away(Reason::NO_ERROR);
            }
            if let Poll::Ready(e) = d.poll_io(cx) {
                return Poll::Ready(e);
            }
            let at = d.deadline();
            if at != timer_at {
                timer_at = at;
                timer.as_mut().reset(at);
            }
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if let Some(e) = d.timer_fired() {
                return Poll::Ready(e);
            }
        }
    })
    .await;
    if end == End::Park {
        drop(timer);
        let rt = d.rt.clone();
        match d.into_parked() {
            Some(state) => {
                tracing::debug!("h2 {peer}: idle, parked");
                let deadline = state.idle_until;
                open.parked = true;
                super::park::park_h2(state, peer, rt, deadline, &worker);
                return true;
            }
            // `may_park` said it could: not reached. The connection
            // closes (as a client gone).
            None => return false,
        }
    }
    tracing::debug!("h2 {peer}: connection ends: {end:?}");
    d.finish(end).await;
    if worker.is_stopping() {
        // The process exits soon: the connection's last frames must reach
        // the client before the socket is let go (see `proto::settle`).
        // Dropping the connection closes its descriptor; a second one
        // keeps the socket until then.
        if let Some(fd) = crate::proto::settle::hold(raw) {
            let send_timeout = d.rt.limits.send_timeout;
            drop(d);
            crate::proto::settle::settle(std::os::fd::AsFd::as_fd(&fd), send_timeout).await;
        }
    }
    false
}

impl<F: Future<Output = ()> + 'static> Driver<F> {
    /// Reads, lets the codec and the handlers act, writes: until the
    /// socket has nothing to give and takes nothing more. Ready when the
    /// connection is over.
    fn poll_io(&mut self, cx: &mut Context<'_>) -> Poll<End> {
        {
            let mut sh = self.shared.borrow_mut();
            if !sh.writer.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                sh.writer = Some(cx.waker().clone());
            }
        }
        loop {
            let mut progress = false;
            if self.may_read() {
                if self.rbuf.capacity() - self.rbuf.len() < READ_SIZE / 2 {
                    self.rbuf.reserve(READ_SIZE);
                }
                let spare = self.rbuf.spare_capacity_mut();
                let mut buf = ReadBuf::uninit(spare);
                match Pin::new(&mut self.io).poll_read(cx, &mut buf) {
                    Poll::Ready(Ok(())) => {
                        let n = buf.filled().len();
                        if n == 0 {
                            // The client closed: what is queued still
                            // gets a chance to go (`finish`).
                            self.read_closed = true;
                            return Poll::Ready(End::Closed);
                        }
                        // SAFETY: `poll_read` initialised the first `n`
                        // bytes of the spare capacity (`ReadBuf::filled`).
                        unsafe { self.rbuf.set_len(self.rbuf.len() + n) };
                        progress = true;
                        self.input();
                    }
                    Poll::Ready(Err(e)) => {
                        tracing::debug!("h2 {}: read: {e}", self.peer);
                        return Poll::Ready(End::Gone);
                    }
                    Poll::Pending => {}
                }
            }
            match self.poll_write(cx) {
                Poll::Ready(Ok(true)) => {
                    progress = true;
                    if self.input_held && !self.shared.borrow().codec.backlogged() {
                        self.input();
                    }
                }
                Poll::Ready(Ok(false)) => {}
                Poll::Ready(Err(())) => return Poll::Ready(End::Gone),
                Poll::Pending => {}
            }
            if self.over() {
                return Poll::Ready(End::Done);
            }
            if !progress {
                if self.rbuf.is_empty() && self.live.get() == 0 {
                    // Nothing in progress: the read buffer of a
                    // connection that served one stream goes back to the
                    // allocator, so that many new connections cost little
                    // memory (the next read takes a fresh one). One that
                    // came back for more keeps it until it idles for the
                    // park delay (`shrink_if_idle`, or it parks): a 16 KiB
                    // malloc and free per request saved.
                    if !self.repeat {
                        self.rbuf = BytesMut::new();
                    }
                    if !self.shrunk && self.shrink_at.is_none() {
                        // Armed once per idle spell, not per request: a
                        // timer reset per request would cost more than
                        // the buffers save.
                        self.shrink_at = Some(Instant::now() + super::park::PARK_AFTER);
                        self.stirred = false;
                    }
                }
                return Poll::Pending;
            }
        }
    }

    /// Whether to read now: not once reading ended, nor while the output
    /// is over its bound or the codec holds frames back (a client that
    /// does not read what it asks for is not read either).
    fn may_read(&self) -> bool {
        !self.read_closed && !self.input_held && {
            let sh = self.shared.borrow();
            sh.codec.output_len() < sh.max_output && !sh.codec.backlogged() && !sh.codec.is_closed()
        }
    }

    /// Whether the connection is over: the codec is closed, or GOAWAY
    /// went and every stream ended; and the output is written.
    fn over(&self) -> bool {
        let sh = self.shared.borrow();
        sh.codec.output_len() == 0
            && !self.unflushed
            && (sh.codec.is_closed()
                || (self.closing && sh.codec.open_streams() == 0 && self.live.get() == 0))
    }

    /// Writes the output: Ok(true) when some went, Ok(false) when there
    /// was none, Pending when the socket takes no more now.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Poll<Result<bool, ()>> {
        let mut wrote = false;
        loop {
            let mut sh = self.shared.borrow_mut();
            let pending = sh.codec.output_len();
            if pending == 0 {
                break;
            }
            // The frames and the shared bodies between them (a cached
            // file's, not copied into the output) in one write.
            let mut slices = [IoSlice::new(&[]); WRITE_SLICES];
            let k = sh.codec.output_vectored(&mut slices);
            match Pin::new(&mut self.io).poll_write_vectored(cx, &slices[..k]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(())),
                Poll::Ready(Ok(n)) => {
                    let was_full = pending >= sh.max_output;
                    sh.codec.consume_output(n);
                    wrote = true;
                    self.unflushed = self.io.inner.is_tls();
                    self.stalled_since = None;
                    if was_full || !sh.room.is_empty() {
                        for w in sh.room.drain(..) {
                            w.wake();
                        }
                    }
                }
                Poll::Ready(Err(e)) => {
                    tracing::debug!("h2 {}: write: {e}", self.peer);
                    return Poll::Ready(Err(()));
                }
                Poll::Pending => {
                    self.stalled_since.get_or_insert_with(Instant::now);
                    return Poll::Pending;
                }
            }
        }
        if self.unflushed {
            match Pin::new(&mut self.io).poll_flush(cx) {
                Poll::Ready(Ok(())) => self.unflushed = false,
                Poll::Ready(Err(_)) => return Poll::Ready(Err(())),
                Poll::Pending => {
                    self.stalled_since.get_or_insert_with(Instant::now);
                    return Poll::Pending;
                }
            }
        }
        Poll::Ready(Ok(wrote))
    }

    /// Writes until the output is empty (or the socket fails).
    fn poll_write_all(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match self.poll_write(cx) {
                Poll::Ready(Ok(true)) => continue,
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Bytes were read: the codec takes every complete frame; its events
    /// go to the streams; new requests start.
    fn input(&mut self) {
        let mut starts = std::mem::take(&mut self.starts);
        let failed = {
            let mut sh = self.shared.borrow_mut();
            let sh = &mut *sh;
            let r = sh.codec.recv(&mut self.rbuf);
            if let Err(e) = &r {
                tracing::debug!("h2 {}: {e}", self.peer);
            }
            self.input_held = r.is_ok() && sh.codec.backlogged() && !self.rbuf.is_empty();
            while let Some(ev) = sh.codec.next_event() {
                match ev {
                    Event::Request {
                        id,
                        head,
                        end_stream,
                    } => {
                        sh.slots.push(Slot::new(id, end_stream));
                        starts.push((id, head, end_stream));
                    }
                    Event::Data {
                        id,
                        data,
                        end_stream,
                    } => data_event(sh, id, data, end_stream),
                    Event::Trailers { id, fields } => {
                        if let Some(s) = sh.slot(id) {
                            s.trailers = Some(fields);
                            s.end = true;
                            s.wake();
                        }
                        if let Some(i) = sh.find(id).filter(|&i| sh.slots[i].discard.is_some()) {
                            sh.slots.swap_remove(i);
                        }
                    }
                    Event::Reset { id, .. } => {
                        if let Some(i) = sh.find(id) {
                            let s = &mut sh.slots[i];
                            s.reset = true;
                            s.wake();
                            if s.discard.is_some() {
                                sh.slots.swap_remove(i);
                            }
                        }
                    }
                    Event::WindowUpdate { id } => {
                        if id == 0 {
                            sh.wake_all();
                        } else if let Some(s) = sh.slot(id) {
                            s.wake();
                        }
                    }
                    Event::HeadersTooLarge { id } => {
                        // RFC 9113 §10.5.1: 431 (RFC 6585 §5), the
                        // connection stays.
                        let mut lines = Vec::with_capacity(80);
                        self.worker.push_date(&mut lines);
                        lines.extend_from_slice(b"content-length: 0\r\n");
                        sh.send_whole_head(id, 431, &lines);
                    }
                    Event::GoAway { .. } => {
                        // The client opens no more streams; those in
                        // progress finish.
                        self.closing = true;
                    }
                }
            }
            r.is_err()
        };
        for (id, head, end) in starts.drain(..) {
            self.start(id, &head, end);
            // Copied out into the stream's head: its memory serves the
            // next request's.
            self.shared.borrow_mut().codec.recycle(head);
        }
        self.starts = starts;
        if failed {
            // A connection error: the codec queued GOAWAY; it is written,
            // then the connection closes.
            self.read_closed = true;
            self.closing = true;
            self.gone_by.get_or_insert(Instant::now() + GOAWAY_GRACE);
        }
    }

    /// Starts the handler of a request: routing and the handler run at
    /// once, in this task; only a handler that has to wait becomes a
    /// task of its own.
    fn start(&mut self, id: u32, head: &stoa_h2::Request, end: bool) {
        {
            let mut sh = self.shared.borrow_mut();
            let Some(i) = sh.find(id) else { return };
            if sh.slots[i].reset {
                // Opened and cancelled at once: not worth serving
                // (CVE-2023-44487).
                sh.slots.swap_remove(i);
                return;
            }
            if self.live.get() >= self.max_live {
                // Streams come faster than their handlers end: a client
                // opening and cancelling streams without end
                // (CVE-2023-44487) gets GOAWAY.
                drop(sh);
                tracing::warn!("h2 {}: too many streams in progress, closing", self.peer);
                self.abort(Reason::ENHANCE_YOUR_CALM);
                return;
            }
        }
        self.busy = true;
        self.repeat = self.started_one;
        self.started_one = true;
        self.shrunk = false;
        self.stirred = true;
        let is_tls = self.tls.is_some();
        self.live.set(self.live.get() + 1);
        if let Some(s) = self.worker.stats() {
            s.stream_opened(is_tls);
        }
        let guard = Live {
            count: self.live.clone(),
            worker: self.worker.clone(),
            tls: is_tls,
        };
        // A reload since the last stream: this one uses the new
        // configuration (the connection's own settings, agreed at its
        // start, stay).
        super::refresh(&mut self.rt);
        let spare = self.shared.borrow_mut().spare_requests.pop();
        let (req, expect_continue) = request_head(head, end, spare);
        let side = H2Stream::new(
            self.shared.clone(),
            id,
            self.peer,
            self.local,
            self.tls,
            expect_continue,
            end,
        );
        let fut = (self.make)(side, req, self.worker.clone(), self.rt.clone(), guard);
        let mut fut = match self.spare.take() {
            Some(mut b) => {
                b.as_mut().set(fut);
                b
            }
            None => Box::pin(fut),
        };
        // A waker that does nothing: a handler that has to wait is
        // spawned, and its task polls it again at once, registering its
        // own waker.
        let mut cx = Context::from_waker(Waker::noop());
        self.shared.borrow_mut().in_turn = true;
        let pending = fut.as_mut().poll(&mut cx).is_pending();
        self.shared.borrow_mut().in_turn = false;
        if pending {
            tokio::task::spawn_local(fut);
        } else {
            self.spare = Some(fut);
        }
    }

    /// GOAWAY with `code`: graceful when NO_ERROR (streams in progress
    /// finish, new ones are refused).
    fn go_away(&mut self, code: Reason) {
        if self.closing && code == Reason::NO_ERROR {
            return;
        }
        self.closing = true;
        let mut sh = self.shared.borrow_mut();
        sh.codec.go_away(code);
        sh.wake_writer();
    }

    /// GOAWAY with an error, and the end of reading: the connection
    /// closes once it is written, or after [`GOAWAY_GRACE`].
    fn abort(&mut self, code: Reason) {
        self.go_away(code);
        self.read_closed = true;
        self.gone_by.get_or_insert(Instant::now() + GOAWAY_GRACE);
    }

    /// The next time something is due.
    fn deadline(&self) -> Instant {
        let mut at = self.idle_until;
        if let Some(g) = self.gone_by {
            at = at.min(g);
        }
        if let Some(s) = self.stalled_since {
            at = at.min(s + self.rt.limits.send_timeout);
        }
        if let Some(s) = self.shrink_at {
            at = at.min(s);
        }
        at
    }

    /// A deadline passed: what it means. Some when the connection is
    /// over.
    fn timer_fired(&mut self) -> Option<End> {
        let now = Instant::now();
        if self.gone_by.is_some_and(|g| g <= now) {
            tracing::debug!("h2 {}: did not end after GOAWAY, dropped", self.peer);
            return Some(End::Late);
        }
        if self
            .stalled_since
            .is_some_and(|s| s + self.rt.limits.send_timeout <= now)
        {
            tracing::debug!("h2 {}: the client does not read, dropped", self.peer);
            return Some(End::Late);
        }
        if self.shrink_at.is_some_and(|s| s <= now) {
            self.shrink_at = None;
            if std::mem::take(&mut self.stirred) {
                // Busy meanwhile: idle for the whole delay from now on
                // first.
                self.shrink_at = Some(now + super::park::PARK_AFTER);
            } else if self.may_park() {
                return Some(End::Park);
            }
            self.shrink_if_idle();
        }
        if self.idle_until <= now {
            let open = self.shared.borrow().codec.open_streams();
            if self.live.get() == 0 && open == 0 && !self.busy {
                if self.closing {
                    // GOAWAY went (or could not go) a whole idle period
                    // ago: a client that does not read.
                    return Some(End::Late);
                }
                self.go_away(Reason::NO_ERROR);
            }
            self.busy = false;
            self.idle_until = now + self.rt.limits.keepalive_timeout;
        }
        None
    }

    /// Whether the connection can wait in the lot instead of its task:
    /// nothing in progress anywhere (no stream, handler, input, output
    /// (the TLS session's included), GOAWAY or deadline but the
    /// keep-alive one), and a lot on this thread.
    fn may_park(&self) -> bool {
        !self.io.rewinding()
            && match &self.io.inner {
                Stream::Plain(_) => true,
                Stream::Tls(t) => !t.get_ref().1.wants_write(),
            }
            && super::park::enabled()
            && !self.worker.is_stopping()
            && self.live.get() == 0
            && self.rbuf.is_empty()
            && !self.input_held
            && !self.read_closed
            && !self.closing
            && !self.unflushed
            && self.gone_by.is_none()
            && self.stalled_since.is_none()
            && Rc::strong_count(&self.shared) == 1
            && {
                let sh = self.shared.borrow();
                sh.slots.is_empty() && sh.room.is_empty() && sh.codec.at_rest()
            }
            && quiet(std::os::fd::AsRawFd::as_raw_fd(self.io.inner.tcp()))
    }

    /// The connection leaves its task (see [`Driver::may_park`]): its
    /// socket, and its state with the buffers given back.
    fn into_parked(self) -> Option<Box<Parked>> {
        let Driver {
            io,
            shared,
            spare,
            busy,
            rt,
            max_live,
            local,
            mut idle_until,
            ..
        } = self;
        // The last handler's box holds nothing of the connection, but is
        // let go first so that `shared` is the codec's only owner.
        drop(spare);
        let sh = Rc::try_unwrap(shared).ok()?.into_inner();
        let max_output = sh.max_output;
        let mut codec = sh.into_codec();
        codec.shrink_idle();
        let io = match io.into_inner().ok()? {
            // Leaving tokio: its registration is freed (an `epoll_ctl`
            // DEL).
            Stream::Plain(tcp) => ParkedIo::Plain(tcp.into_std().ok()?),
            Stream::Tls(t) => ParkedIo::Tls(t),
        };
        if busy {
            // A stream started since the idle timer last fired: that timer
            // would have given it another keep-alive period.
            idle_until += rt.limits.keepalive_timeout;
        }
        let state = Box::new(Parked {
            io,
            codec,
            max_output,
            max_live,
            local,
            idle_until,
        });
        Some(state)
    }

    /// No stream open or running and nothing read: what is kept for the
    /// next request (the codec's buffers, the reused handler box) goes
    /// back to the allocator, so an idle connection holds little more
    /// than its HPACK table.
    fn shrink_if_idle(&mut self) {
        if self.live.get() != 0 || !self.rbuf.is_empty() {
            return;
        }
        let mut sh = self.shared.borrow_mut();
        if sh.codec.open_streams() != 0 {
            return;
        }
        sh.codec.shrink_idle();
        sh.spare_requests = Vec::new();
        drop(sh);
        self.rbuf = BytesMut::new();
        self.spare = None;
        self.starts = Vec::new();
        self.shrunk = true;
    }

    /// After the loop: streams still running learn the connection is
    /// gone; what is left to write gets a bounded chance; the client's
    /// bytes are read and dropped until it closes (bounded too), so that
    /// a close with unread input does not reset the connection before
    /// the client read its GOAWAY.
    async fn finish(&mut self, end: End) {
        {
            let mut sh = self.shared.borrow_mut();
            sh.closed = true;
            sh.wake_all();
        }
        if end == End::Gone {
            return;
        }
        let until = Instant::now() + GOAWAY_GRACE;
        let written = tokio::time::timeout_at(until, poll_fn(|cx| self.poll_write_all(cx))).await;
        if written.is_err() || end == End::Closed {
            return;
        }
        self.io.inner.shutdown_write();
        let mut sink = [0u8; 4096];
        let _ = tokio::time::timeout_at(until, async {
            loop {
                let mut buf = ReadBuf::new(&mut sink);
                match poll_fn(|cx| Pin::new(&mut self.io).poll_read(cx, &mut buf)).await {
                    Ok(()) if !buf.filled().is_empty() => {}
                    _ => break,
                }
            }
        })
        .await;
    }
}

/// Whether the socket has nothing to read: no byte and no end. The
/// loop's last read may have been answered from tokio's readiness (not
/// yet told of new bytes) rather than the socket: a connection whose
/// next request already waits (a worker behind by the park delay) would
/// otherwise park and be woken at once.
fn quiet(fd: std::os::fd::RawFd) -> bool {
    let mut byte = 0u8;
    // SAFETY: a one-byte buffer we own; MSG_PEEK leaves the byte in the
    // socket; the descriptor is the connection's, open for the call.
    let r = unsafe {
        libc::recv(
            fd,
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock
}

/// Request body bytes for stream `id`: to its handler, or dropped (their
/// window given back at once) when nobody reads them any more.
fn data_event(sh: &mut Shared, id: u32, data: bytes::Bytes, end: bool) {
    let n = data.len();
    let Some(i) = sh.find(id) else {
        // A stream whose handler is gone: only the connection's window
        // matters.
        if n > 0 {
            sh.codec.release(id, n);
        }
        return;
    };
    if let Some(left) = sh.slots[i].discard {
        if n > 0 {
            sh.codec.release(id, n);
        }
        if end {
            sh.slots.swap_remove(i);
        } else if n as u64 > left {
            // More than is worth reading: the client is asked to stop,
            // without an error (RFC 9113 §8.1).
            sh.codec.reset(id, Reason::NO_ERROR);
            sh.slots.swap_remove(i);
        } else {
            sh.slots[i].discard = Some(left - n as u64);
        }
        return;
    }
    let s = &mut sh.slots[i];
    if n > 0 {
        s.unread += n;
        s.body.push_back(data);
    }
    if end {
        s.end = true;
    }
    s.wake();
}

/// One stream: routing and the handler, then the end of the response.
async fn stream(
    mut side: H2Stream,
    head: RequestHead,
    worker: Rc<Worker>,
    rt: Arc<Runtime>,
    guard: Live,
) {
    let (mut hsts, mut edge) = (None, Edge::none());
    let tls = side.tls.is_some();
    let (p, rewritten) = route::pick_request(&head, &rt, tls, &mut hsts, &mut edge);
    let truncated = {
        let req = rewritten.as_ref().unwrap_or(&head);
        let mut ex = Exchange::h2(&mut side, req, &worker, &rt.limits)
            .with_hsts(hsts)
            .with_edge(edge);
        route::run(p, &mut ex, &rt, 0).await;
        ex.truncated()
    };
    if truncated {
        side.reset();
    } else {
        side.flush(true, rt.limits.send_timeout).await;
    }
    side.give_back_request(head);
    drop(side);
    drop(guard);
}

/// The request as an HTTP/1.1 head, which is what routing and handlers
/// read: `:authority` becomes Host (RFC 9113 §8.3.1), split `cookie`
/// fields are joined with "; " (§8.2.3), the body's framing is its
/// content-length or unknown. Also whether it expects `100 Continue`.
/// `spare`: an ended stream's head, whose buffers are reused.
#[inline(never)]
fn request_head(
    req: &stoa_h2::Request,
    ended: bool,
    spare: Option<RequestHead>,
) -> (RequestHead, bool) {
    let m = req.method();
    let method = Method::from_token(m)
        .unwrap_or_else(|| Method::Other(String::from_utf8_lossy(m).into_owned()));
    let path = req.path().filter(|p| !p.is_empty()).unwrap_or(b"/");
    // `OPTIONS *` (RFC 9113 §8.3.1: `:path` is `*`).
    let target: &[u8] = if method == Method::Options && (path == b"*" || path == b"/*") {
        b"*"
    } else {
        path
    };
    let authority = req.authority().filter(|a| !a.is_empty());
    let (mut cookies, mut expect_continue, mut length) = (0, false, None);
    for (name, value) in req.fields() {
        match name {
            b"cookie" => cookies += 1,
            b"expect" => expect_continue |= value.eq_ignore_ascii_case(b"100-continue"),
            b"content-length" => length = stoa_h1::parse_u64(value),
            _ => {}
        }
    }
    // Split `cookie` fields, joined.
    let cookie = (cookies > 1).then(|| {
        let mut c = Vec::new();
        for (_, value) in req.fields().filter(|(n, _)| *n == b"cookie") {
            if !c.is_empty() {
                c.extend_from_slice(b"; ");
            }
            c.extend_from_slice(value);
        }
        c
    });
    let host = authority.map(|a| (&b"host"[..], a));
    let fields = host
        .into_iter()
        .chain(req.fields().filter(|(n, _)| {
            let replaced = *n == b"host" && authority.is_some();
            let joined = *n == b"cookie" && cookies > 1;
            !replaced && !joined
        }))
        .chain(cookie.as_deref().map(|c| (&b"cookie"[..], c)));
    let mut head = match spare {
        Some(mut h) => {
            h.refill(method, target, Version::Http11, fields);
            h
        }
        None => RequestHead::from_parts(method, target, Version::Http11, fields),
    };
    head.framing = match (ended, length) {
        (true, _) => Framing::None,
        (false, Some(n)) => Framing::Length(n),
        // Delimited by END_STREAM: like chunked, its length is known at
        // its end only.
        (false, None) => Framing::Chunked,
    };
    head.expect_continue = false;
    (head, expect_continue)
}

#[cfg(test)]
mod tests {
    /// What a parked connection keeps beyond its socket (and, over TLS,
    /// its session): this state (about 680 bytes, kept in the lot's slab), a lot slot and
    /// the HPACK table's entries. It must stay well under what a waiting
    /// task held (~7 KB with its future and task cell, docs/BENCHMARKS.md)
    /// and under nginx's ~1.5 KB per idle HTTP/2 connection.
    #[test]
    fn a_parked_connections_state_stays_under_768_bytes() {
        let size = std::mem::size_of::<super::Parked>();
        assert!(size <= 768, "{size} bytes");
    }
}
