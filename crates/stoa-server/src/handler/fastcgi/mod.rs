//! The FastCGI handler: a request goes to a process of a pool (the
//! upstream layer) over a kept-alive connection, as FastCGI records built
//! by the sans-IO `stoa-fastcgi` crate; the application's stdout goes
//! through the same CGI head parser and gateway as a CGI script's.

mod mux;

use super::Outcome;
use crate::exchange::Exchange;
use crate::gateway::life::{self, Fail, Retry};
use crate::gateway::{self, response, Bufs, ClientEv, Input};
use crate::upstream::pool::PoolSpec;
use crate::upstream::{AppStream, Lease, Pool, Proc};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use stoa_cgi::{HeadError, Kind};
use stoa_fastcgi::gateway::{Connection, Event};
use stoa_fastcgi::{ProtocolStatus, Role};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

/// Largest response head accepted from an application.
const MAX_HEAD: usize = 64 * 1024;
/// Read size from the application; also bounds what a slow client makes
/// Stoa hold.
const READ_CHUNK: usize = 32 * 1024;

/// A FastCGI route, validated.
#[derive(Debug)]
pub struct FastCgiRoute {
    /// Index into `Runtime::pools`.
    pub pool: usize,
    pub pool_name: String,
    /// SCRIPT_FILENAME is this root plus the request path (its script
    /// part, with `split_path`).
    pub document_root: String,
    /// SCRIPT_NAME ends after the first occurrence of this followed by '/'
    /// or the end; the rest is PATH_INFO.
    pub split_path: Option<String>,
    /// Extra parameters (`params = {...}`), set after the CGI variables.
    pub params: Vec<(String, String)>,
    /// Read the request body before taking a process.
    pub buffering: bool,
    /// When a failed try goes again (`gateway::life`).
    pub(crate) retries: life::Retries,
}

/// Serves a request from a FastCGI pool (the Responder role). `pools` are
/// the running pools `route.pool` indexes; `extra` are variables an
/// Authorizer granted.
pub async fn serve(
    route: &FastCgiRoute,
    norm: String,
    ex: &mut Exchange<'_>,
    pools: &[Arc<Pool>],
    extra: &[(String, Vec<u8>)],
) -> Outcome {
    let Some(pool) = pools.get(route.pool).cloned() else {
        tracing::error!(
            "fastcgi: pool {} is not running; {}",
            route.pool_name,
            ex.who()
        );
        gateway::simple(ex, 503, &[]);
        return Outcome::Done;
    };
    let Some(mut input) = gateway::read_input(ex, route.buffering).await else {
        return Outcome::Done;
    };
    // Routing refused paths with control characters or `..` before this
    // point, so the split cannot be steered (CVE-2019-11043).
    let (script_name, path_info) = match route
        .split_path
        .as_deref()
        .and_then(|m| crate::http::path::split_at(&norm, m))
    {
        Some(at) => norm.split_at(at),
        None => (norm.as_str(), ""),
    };
    let filename = format!(
        "{}{}",
        route.document_root.trim_end_matches('/'),
        script_name
    );
    let names = gateway::Names {
        script_name,
        path_info,
        document_root: &route.document_root,
        script_filename: &filename,
    };
    // The application is the server's own business: Authorization passes
    // (php-fpm apps do their own authentication).
    let mut params = gateway::meta_env(ex, names, input.content_length(), true);
    for (k, v) in &route.params {
        params.set(k, v.as_bytes());
    }
    gateway::add_variables(&mut params, extra);
    // The route's `timeout`, in place of the pool's.
    let timeout = ex.edge().timeout.unwrap_or(pool.spec.timeout);
    match run(
        &pool,
        Role::Responder,
        &params,
        &mut input,
        ex,
        timeout,
        &route.retries,
    )
    .await
    {
        Ran::Sent => Outcome::Done,
        Ran::Redirect(loc) => Outcome::Redirect(loc),
        // Only an Authorizer's answer is taken as a grant.
        Ran::Authorized(_) => {
            gateway::simple_now(ex, 502);
            Outcome::Done
        }
    }
}

pub use crate::handler::Authz;

/// Asks the Authorizer application of pool `pool` about a request (§6.3).
pub async fn authorize(pool: usize, ex: &mut Exchange<'_>, pools: &[Arc<Pool>]) -> Authz {
    let Some(pool) = pools.get(pool).cloned() else {
        tracing::error!(
            "fastcgi: authorizer pool #{pool} is not running; {}",
            ex.who()
        );
        gateway::simple(ex, 503, &[]);
        return Authz::Answered;
    };
    let norm = crate::http::path::normalize(ex.req().path()).unwrap_or_default();
    let names = gateway::Names {
        script_name: &norm,
        path_info: "",
        document_root: "",
        script_filename: "",
    };
    let mut params = gateway::meta_env(ex, names, None, true);
    // §6.3: "The Web server does not send CONTENT_LENGTH, PATH_INFO,
    // PATH_TRANSLATED, and SCRIPT_NAME headers" (nor the file names, which
    // belong to whatever serves the request afterwards).
    params.retain(|k| {
        !matches!(
            k,
            "CONTENT_LENGTH"
                | "PATH_INFO"
                | "PATH_TRANSLATED"
                | "SCRIPT_NAME"
                | "SCRIPT_FILENAME"
                | "DOCUMENT_ROOT"
        )
    });
    let mut input = Input::None;
    let timeout = pool.spec.timeout;
    // An Authorizer's own retries: the defaults (a route's `retries` are
    // for its responder).
    let retries = life::Retries::default();
    match run(
        &pool,
        Role::Authorizer,
        &params,
        &mut input,
        ex,
        timeout,
        &retries,
    )
    .await
    {
        Ran::Authorized(vars) => Authz::Allow(vars),
        Ran::Sent => Authz::Answered,
        // An Authorizer's local redirect is not a grant.
        Ran::Redirect(_) => {
            gateway::simple_now(ex, 502);
            Authz::Answered
        }
    }
}

/// How a request to a pool ended.
enum Ran {
    /// A response went to the client (or the connection failed).
    Sent,
    /// An Authorizer answered 200 with these variables.
    Authorized(Vec<(String, Vec<u8>)>),
    /// A local redirect, to be routed again.
    Redirect(Vec<u8>),
}

/// Runs the request at a process of the pool through the upstream life
/// cycle (`gateway::life`), which retries elsewhere when a process
/// refuses the connection or the request before any output.
async fn run(
    pool: &Arc<Pool>,
    role: Role,
    params: &stoa_cgi::Env,
    input: &mut Input,
    ex: &mut Exchange<'_>,
    timeout: std::time::Duration,
    retries: &life::Retries,
) -> Ran {
    let mut steps = Fcgi {
        pool,
        role,
        params,
        timeout,
    };
    let plan = life::Plan {
        pool,
        retries,
        // A body streamed to the application is never sent again.
        streamed: false,
    };
    life::run(&mut steps, &plan, ex, input)
        .await
        .unwrap_or(Ran::Sent)
}

/// The FastCGI steps of the upstream life cycle.
struct Fcgi<'a> {
    pool: &'a Arc<Pool>,
    role: Role,
    params: &'a stoa_cgi::Env,
    timeout: std::time::Duration,
}

/// A connection for one request: its own (parked before, or new), or a
/// share of a multiplexed one.
enum FcgiConn {
    Own(AppStream, bool),
    Mux(mux::MuxRequest),
}

impl life::Steps for Fcgi<'_> {
    type Conn = FcgiConn;
    type Out = Ran;
    /// A FastCGI process that closed a new connection is usually on its
    /// way out (php-fpm recycling or reloading a child, a spawned process
    /// restarting): its successor takes over the same listening socket in
    /// a moment, so the same process is worth a second try after a short
    /// pause. An HTTP server gives no such promise.
    const SAME_SERVER_PAUSE: Option<std::time::Duration> =
        Some(std::time::Duration::from_millis(50));
    /// A FastCGI process that closes a parked connection is often on its
    /// way out (php-fpm recycling a child, a process killed while idle):
    /// another process is the better bet when the pool has one.
    const RACE_ELSEWHERE: bool = true;
    const KIND: &'static str = "fastcgi";
    const ANOTHER: &'static str = "retrying on another process";

    fn reuse(&mut self, lease: &Lease, strict: bool) -> Option<FcgiConn> {
        if lease.proc.multiplexes() {
            return None;
        }
        // A parked connection the application has closed meanwhile
        // (php-fpm recycling or reloading a child) fails the request
        // before any response byte, and one that may go again simply
        // does. One that may not is checked first (a peek: one more
        // syscall, +3-4 us per request when it was done for all, so only
        // where a retry cannot stand in), and so is one parked after a
        // request with a body, which the application may close at once (a
        // retry alone met three such in a row in 5 runs of 12).
        std::iter::from_fn(|| lease.take_idle())
            .filter_map(|c| {
                let suspect = c.suspect;
                AppStream::from_idle(c).ok().map(|s| (s, suspect))
            })
            .find(|(s, suspect)| (!strict && !suspect) || s.looks_open())
            .map(|(s, _)| FcgiConn::Own(s, true))
    }

    async fn connect(&mut self, lease: &Lease) -> Result<FcgiConn, Fail> {
        if lease.proc.multiplexes() {
            return match mux::start(&lease.proc, self.role, self.params, self.pool.spec.timeout)
                .await
            {
                Ok(r) => Ok(FcgiConn::Mux(r)),
                Err(mux::StartError::Connect(e)) => Err(Fail::connect(&e)),
                Err(mux::StartError::Protocol(e)) => Err(Fail::local(500, e.to_string())),
            };
        }
        AppStream::connect(&lease.proc.target, self.pool.spec.timeout)
            .await
            .map(|s| FcgiConn::Own(s, false))
            .map_err(|e| Fail::connect(&e))
    }

    async fn exchange(
        &mut self,
        ex: &mut Exchange<'_>,
        lease: Lease,
        conn: FcgiConn,
        input: &mut Input,
        _t: &life::Try<'_>,
    ) -> Result<Ran, Fail> {
        let reused = matches!(conn, FcgiConn::Own(_, true));
        let up = match conn {
            FcgiConn::Mux(r) => Upstream::Mux(r),
            FcgiConn::Own(app, reused) => {
                match Direct::start(app, &lease, self.role, self.params, reused) {
                    Ok(d) => Upstream::Direct(Box::new(d)),
                    Err(e) => return Err(Fail::local(500, e.to_string())),
                }
            }
        };
        let proc = lease.proc.clone();
        match exchange(self, ex, lease, up, input).await {
            // The keep-alive race: the application closed a parked
            // connection as the request went out on it; or a process on
            // its way out (php-fpm's reload) took a new one and closed
            // it; or the process died (killed, crashed) before its
            // response head was complete. Nothing reached the client; the
            // application may have started on it.
            Done::Stale(reused) => Err(Fail::closed(
                reused,
                Retry::MaybeSent,
                if reused {
                    "closed a kept-alive connection before a response"
                } else {
                    "closed a new connection before a response"
                },
            )),
            Done::TimedOut => Err(Fail::timeout(
                reused,
                format!("sent no response within {:?}", self.timeout),
            )),
            Done::Lost => Err(Fail::closed(
                false,
                Retry::MaybeSent,
                "lost the connection before a complete response head",
            )),
            // Refused before any output (END_REQUEST with OVERLOADED or
            // CANT_MPX_CONN): nothing was done, any request may go again;
            // to another process (OVERLOADED), or the same one without
            // multiplexing (CANT_MPX_CONN).
            Done::Refused(ps) => {
                if ps == ProtocolStatus::CantMpxConn {
                    proc.stop_multiplexing();
                }
                Err(Fail {
                    cause: life::Cause::Refused,
                    retry: Retry::Unsent,
                    reused: false,
                    same_server: ps == ProtocolStatus::CantMpxConn,
                    status: 503,
                    retry_after: true,
                    what: format!("refused the request ({ps:?})"),
                })
            }
            Done::Sent => Ok(Ran::Sent),
            Done::Authorized(v) => Ok(Ran::Authorized(v)),
            // The lease is gone: the process is free before the new
            // request runs, which may need this very pool.
            Done::Redirect(loc) => Ok(Ran::Redirect(loc)),
        }
    }
}

/// One request's own connection to a process.
struct Direct {
    app: AppStream,
    gw: Connection,
    id: u16,
    bufs: Bufs,
    wpos: usize,
    eof: bool,
    /// The connection was parked before this request.
    reused: bool,
    /// Bytes came from the application on it.
    heard: bool,
    /// The end of stdin was queued (the whole request is in `bufs.w` or
    /// already sent).
    stdin_done: bool,
    /// Request body bytes went out on it.
    had_body: bool,
}

impl Direct {
    fn start(
        app: AppStream,
        lease: &Lease,
        role: Role,
        params: &stoa_cgi::Env,
        reused: bool,
    ) -> Result<Direct, stoa_fastcgi::Error> {
        let mut gw = Connection::new();
        let mut bufs = Bufs::take(READ_CHUNK);
        if lease.proc.ask_values() {
            gw.query_values(&mut bufs.w);
        }
        let id = gw.start_request(role, true, params.iter(), &mut bufs.w)?;
        Ok(Direct {
            app,
            gw,
            id,
            bufs,
            wpos: 0,
            eof: false,
            reused,
            heard: false,
            stdin_done: false,
            had_body: false,
        })
    }

    /// Returns a connection to its process's stash when its request ended
    /// cleanly: END_REQUEST received and the whole of stdin sent. An
    /// application that answered before reading its input may drop the
    /// connection with the rest unread, so anything else closes it.
    fn finish(self, lease: &Lease) {
        if !self.eof
            && self.stdin_done
            && !self.gw.is_closing()
            && self.wpos >= self.bufs.w.len()
            && self.gw.is_idle()
        {
            let mut idle = self.app.into_idle();
            // An application may answer without reading its input and then
            // close the connection (libfcgi does, FastCGI §5.3 allows the
            // answer): the FIN can follow END_REQUEST by microseconds, too
            // late for any check here, so the next user peeks first.
            idle.suspect = self.had_body;
            lease.park(idle);
        }
    }
}

/// The application side of one request: a connection of its own, or its
/// share of a multiplexed one (`mux.rs`).
enum Upstream {
    Direct(Box<Direct>),
    Mux(mux::MuxRequest),
}

/// What [`Upstream::step`] saw.
enum UpStep {
    /// Bytes arrived (events may be ready).
    Read,
    Wrote,
    Lost,
}

impl Upstream {
    fn stdin(&mut self, data: &[u8]) {
        match self {
            Upstream::Direct(d) => {
                d.had_body |= !data.is_empty();
                let _ = d.gw.stdin(d.id, data, &mut d.bufs.w);
            }
            Upstream::Mux(m) => m.stdin(data),
        }
    }

    fn end_stdin(&mut self) {
        match self {
            Upstream::Direct(d) => {
                d.stdin_done = d.gw.end_stdin(d.id, &mut d.bufs.w).is_ok();
            }
            Upstream::Mux(m) => m.end_stdin(),
        }
    }

    /// Records wait to be written: the request body should wait.
    fn backlogged(&self) -> bool {
        match self {
            Upstream::Direct(d) => d.wpos < d.bufs.w.len(),
            Upstream::Mux(m) => m.backlogged(),
        }
    }

    fn lost(&self) -> bool {
        match self {
            Upstream::Direct(d) => d.eof,
            Upstream::Mux(_) => false,
        }
    }

    /// A connection that failed before the application said a thing: the
    /// request may go again on a fresh one.
    fn stale(&self) -> bool {
        match self {
            Upstream::Direct(d) => d.eof && !d.heard,
            Upstream::Mux(_) => false,
        }
    }

    fn reused(&self) -> bool {
        match self {
            Upstream::Direct(d) => d.reused,
            Upstream::Mux(_) => false,
        }
    }

    /// Waits for the application: writes what is queued, reads what comes.
    /// `blocked`: the caller has request body to send and found the write
    /// backlog full (a shared connection's backlog drains in another task).
    async fn step(&mut self, blocked: bool) -> UpStep {
        match self {
            Upstream::Direct(d) => {
                let d = &mut **d;
                if d.bufs.r.len() == d.bufs.r.capacity() {
                    d.bufs.r.clear();
                }
                // Read first, then write what is queued: both on the one
                // stream, without splitting it (which allocates).
                let r = std::future::poll_fn(|cx| {
                    if let Poll::Ready(r) = d.app.poll_read_into(cx, &mut d.bufs.r) {
                        return Poll::Ready(match r {
                            Ok(0) | Err(_) => None,
                            Ok(_) => Some(true),
                        });
                    }
                    if d.wpos < d.bufs.w.len() {
                        if let Poll::Ready(r) =
                            Pin::new(&mut d.app).poll_write(cx, &d.bufs.w[d.wpos..])
                        {
                            return Poll::Ready(match r {
                                Ok(n) if n > 0 => {
                                    d.wpos += n;
                                    Some(false)
                                }
                                _ => None,
                            });
                        }
                    }
                    Poll::Pending
                })
                .await;
                match r {
                    Some(true) => {
                        d.heard = true;
                        let fed = d.gw.feed(&d.bufs.r);
                        d.bufs.r.clear();
                        if let Err(e) = fed {
                            tracing::error!("fastcgi: protocol error: {e}");
                            d.eof = true;
                            return UpStep::Lost;
                        }
                        UpStep::Read
                    }
                    Some(false) => {
                        if d.wpos == d.bufs.w.len() {
                            d.bufs.w.clear();
                            d.wpos = 0;
                        }
                        UpStep::Wrote
                    }
                    None => {
                        d.eof = true;
                        let _ = d.gw.eof();
                        UpStep::Lost
                    }
                }
            }
            Upstream::Mux(m) => {
                m.ready(blocked).await;
                UpStep::Read
            }
        }
    }

    /// The next event of this request; `Err` when its connection was lost.
    fn next_event(&mut self) -> Result<Option<Event>, ()> {
        match self {
            Upstream::Direct(d) => Ok(d.gw.poll_event()),
            Upstream::Mux(m) => match m.poll() {
                None => Ok(None),
                Some(mux::MuxEvent::Event(e)) => Ok(Some(e)),
                Some(mux::MuxEvent::Lost) => Err(()),
            },
        }
    }

    /// Tells the application to stop the request (§5.4), so a
    /// single-threaded one is free for the next; its own connection is
    /// then closed, since its state is unknown.
    async fn abort(self) {
        match self {
            Upstream::Direct(mut d) => {
                if d.eof {
                    return;
                }
                let mut abort = Vec::new();
                if d.gw.abort(d.id, &mut abort).is_ok() {
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_millis(100),
                        d.app.write_all(&abort),
                    )
                    .await;
                }
            }
            // Dropping it aborts it.
            Upstream::Mux(m) => drop(m),
        }
    }

    fn finish(self, lease: &Lease) {
        match self {
            Upstream::Direct(d) => d.finish(lease),
            Upstream::Mux(m) => drop(m),
        }
    }
}

enum Done {
    /// A response went to the client (or the client connection must
    /// close: the exchange says which).
    Sent,
    /// The connection closed before any response byte (whether it was a
    /// kept-alive one); nothing went to the client.
    Stale(bool),
    /// The connection was lost after the application said something but
    /// before its response head was complete (a process killed
    /// mid-request); nothing went to the client.
    Lost,
    /// No response head in time; nothing went to the client.
    TimedOut,
    /// Refused by the application before any output (END_REQUEST with
    /// OVERLOADED or CANT_MPX_CONN) and the input can be sent again.
    Refused(ProtocolStatus),
    Authorized(Vec<(String, Vec<u8>)>),
    /// A local redirect (RFC 3875 §6.2.2) to serve instead.
    Redirect(Vec<u8>),
}

/// Sizes a process's concurrency to what it said in FCGI_GET_VALUES_RESULT
/// (§4.1). Without multiplexing each request has a connection of its own,
/// so both FCGI_MAX_CONNS and FCGI_MAX_REQS bind; a multiplexing process
/// takes MAX_REQS requests spread over at most MAX_CONNS connections, and
/// Stoa opens one per worker (so it multiplexes only when MAX_CONNS allows
/// one per worker). The operator's `capacity` caps what it says.
fn learn(proc: &Proc, v: &stoa_fastcgi::Values, spec: &PoolSpec) {
    let mpx = v.mpxs_conns == Some(true)
        && v.max_conns
            .is_none_or(|c| c as usize >= crate::local::worker_count().max(1));
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
        proc.settle(n, mpx && n > 1);
    }
    // An answer without either limit (php-fpm 8.2 sends only
    // FCGI_MPXS_CONNS=0) says nothing about concurrency: the request's
    // end then applies the pool default, without keep-alive.
    tracing::debug!("pool {}: process #{} says {v:?}", spec.name, proc.index);
}

/// How the exchange loop ended.
enum End {
    /// The response is complete (or the client left after it); whether the
    /// client connection stays.
    Sent(bool),
    /// Stop: the client connection must close; the request is aborted if
    /// the application has not ended it.
    Abort,
    Refused(ProtocolStatus),
    Authorized(Vec<(String, Vec<u8>)>),
    Stale(bool),
    Lost,
    /// No response head within the timeout; nothing went to the client.
    TimedOut,
}

/// Waits on the upstream while there is one (after its release, never).
async fn step(up: &mut Option<Upstream>, blocked: bool) -> UpStep {
    match up {
        Some(u) => u.step(blocked).await,
        None => std::future::pending().await,
    }
}

/// The application ended the request: its connection goes back (or on
/// serving others) and its slot is freed before the client is written to,
/// so a single-threaded application is not idle meanwhile.
fn release(up: &mut Option<Upstream>, lease: &mut Option<Lease>) {
    if let Some(l) = lease.take() {
        if let Some(u) = up.take() {
            u.finish(&l);
        }
        l.served();
    }
}

/// Sends the request and passes the response on (the send, receive and
/// release steps of the life cycle for FastCGI).
async fn exchange(
    call: &Fcgi<'_>,
    ex: &mut Exchange<'_>,
    lease: Lease,
    up: Upstream,
    input: &mut Input,
) -> Done {
    let Fcgi {
        pool,
        role,
        timeout,
        ..
    } = *call;
    let process = lease.proc.index;
    let mut up = Some(up);
    let mut lease = Some(lease);
    let streaming = matches!(input, Input::Stream(_));
    let replayable = input.replayable();
    if let Some(u) = up.as_mut() {
        match input {
            Input::None => u.end_stdin(),
            Input::Memory(v) => {
                u.stdin(v);
                u.end_stdin();
            }
            // A spooled body goes out a piece at a time, as the
            // application takes it (see the loop).
            Input::File(..) => {}
            Input::Stream(_) => {}
        }
    }
    let sleep = tokio::time::sleep(timeout);
    tokio::pin!(sleep);
    let mut incoming = Vec::new();
    let mut out: Vec<u8> = Vec::new();
    // The response head went to the client; HEAD, 204 or 304: without a body.
    let mut down: Option<bool> = None;
    // An Authorizer's 200: its variables, while the rest is discarded.
    let mut granted: Option<Vec<(String, Vec<u8>)>> = None;
    let mut ended = false;
    let mut client_gone = false;

    let mut spool = match input {
        Input::File(f, _) => Some((f, vec![0u8; 64 * 1024])),
        _ => None,
    };
    let result = loop {
        // More of a spooled body, up to the write backlog's limit (one
        // piece on a connection of its own, 256 KiB on a shared one).
        let mut spool_failed = false;
        while let (Some((f, chunk)), Some(u)) = (spool.as_mut(), up.as_mut()) {
            if u.backlogged() {
                break;
            }
            match std::io::Read::read(f, chunk) {
                Ok(0) => {
                    u.end_stdin();
                    spool = None;
                }
                Ok(n) => u.stdin(&chunk[..n]),
                Err(e) => {
                    tracing::error!(
                        "fastcgi pool {}: request body spool: {e}; {}",
                        pool.spec.name,
                        ex.who()
                    );
                    spool_failed = true;
                    break;
                }
            }
        }
        if spool_failed {
            break fail(ex, 500).await;
        }
        let backlogged = up.as_ref().is_some_and(Upstream::backlogged);
        let body_done = !streaming || ex.body_done();
        let want_body = streaming && !body_done && !backlogged && incoming.is_empty();
        let watch_client = !want_body && !client_gone && body_done && ex.can_watch();
        let lost = up.as_ref().is_none_or(Upstream::lost);
        let step = tokio::select! {
            biased;
            s = step(&mut up, backlogged), if !lost => Step::Up(s),
            // The request body when the application can take more, else a
            // watch for the client leaving (its request is then abandoned).
            ev = gateway::client_side(ex, &mut incoming, want_body), if want_body || watch_client => match ev {
                ClientEv::Body(Ok(_)) => Step::Body,
                ClientEv::Body(Err(_)) | ClientEv::Gone => Step::ClientGone,
                ClientEv::Nothing => Step::Nothing,
            },
            _ = &mut sleep => Step::Timeout,
        };
        let mut app_eof = false;
        match step {
            Step::Nothing | Step::Up(UpStep::Wrote) => continue,
            Step::Body => {
                if let Some(u) = up.as_mut() {
                    if !incoming.is_empty() {
                        u.stdin(&incoming);
                    }
                    if !streaming || ex.body_done() {
                        u.end_stdin();
                    }
                }
                incoming.clear();
                continue;
            }
            Step::ClientGone => {
                if !(down.is_some() && ex.is_complete()) {
                    // Output still to come and nobody to read it: abort, so
                    // the process is free at once.
                    break End::Abort;
                }
                // The whole body went out and only END_REQUEST is to come
                // (a client that closes as soon as it has the body): give
                // the application a moment, so the kept-alive connection and
                // the request count survive.
                client_gone = true;
                let soon = Instant::now() + std::time::Duration::from_secs(1);
                if soon < sleep.deadline() {
                    sleep.as_mut().reset(soon);
                }
                continue;
            }
            Step::Timeout => {
                if client_gone {
                    break End::Abort;
                }
                if down.is_none() && granted.is_none() {
                    // Nothing reached the client: the life cycle decides
                    // (another process for an idempotent request, or 504).
                    break End::TimedOut;
                } else {
                    tracing::error!(
                        "fastcgi pool {}: no output for {:?}; {}",
                        pool.spec.name,
                        timeout,
                        ex.who()
                    );
                }
                break End::Abort;
            }
            Step::Up(UpStep::Lost) => app_eof = true,
            Step::Up(UpStep::Read) => {
                if !client_gone {
                    sleep.as_mut().reset(Instant::now() + timeout);
                }
            }
        }
        // Events from what was read.
        let mut refused = None;
        while let Some(u) = up.as_mut() {
            let ev = match u.next_event() {
                Ok(Some(ev)) => ev,
                Ok(None) => break,
                Err(()) => {
                    app_eof = true;
                    break;
                }
            };
            match ev {
                // After an Authorizer's 200 the body is dropped.
                Event::Stdout { data, .. } if granted.is_none() => out.extend_from_slice(&data),
                Event::Stderr { data, .. } => log_stderr(&pool.spec.name, &data, ex),
                Event::Values(v) => {
                    if let Some(l) = &lease {
                        learn(&l.proc, &v, &pool.spec);
                    }
                }
                Event::End {
                    protocol_status, ..
                } => {
                    ended = true;
                    ex.upstream_ended();
                    if let Some(l) = &lease {
                        l.proc.values_settled(&pool.spec);
                    }
                    if matches!(
                        protocol_status,
                        ProtocolStatus::Overloaded | ProtocolStatus::CantMpxConn
                    ) {
                        refused = Some(protocol_status);
                    }
                }
                _ => {}
            }
        }
        if let Some(ps) = refused {
            if down.is_none() && out.is_empty() && granted.is_none() {
                if replayable {
                    break End::Refused(ps);
                }
                tracing::warn!(
                    "fastcgi pool {}: application refused the request ({ps:?}); 503; {}",
                    pool.spec.name,
                    ex.who()
                );
                break fail(ex, 503).await;
            }
        }
        if ended && !app_eof {
            release(&mut up, &mut lease);
        }
        if let Some(vars) = granted.as_mut() {
            if ended {
                break End::Authorized(std::mem::take(vars));
            }
            if app_eof {
                tracing::error!(
                    "fastcgi pool {}: authorizer lost before its end; {}",
                    pool.spec.name,
                    ex.who()
                );
                break fail(ex, 502).await;
            }
            continue;
        }
        if app_eof
            && down.is_none()
            && granted.is_none()
            && out.is_empty()
            && up.as_ref().is_some_and(Upstream::stale)
        {
            break End::Stale(up.as_ref().is_some_and(Upstream::reused));
        }
        if app_eof && !ended && down.is_none() && granted.is_none() {
            // The process went away (killed, crashed) before its answer
            // was complete, and nothing of it reached the client: the
            // request may go to another process (`run` decides).
            break End::Lost;
        }
        if down.is_none() {
            match stoa_cgi::parse_head(&out, MAX_HEAD) {
                Ok(None) if !(ended || app_eof) => continue,
                Ok(None) | Err(_) => {
                    let why = match stoa_cgi::parse_head(&out, MAX_HEAD) {
                        Err(HeadError::Malformed(m)) => m,
                        Err(HeadError::TooLarge) => "head too large".to_owned(),
                        _ => "output ended before a complete head".to_owned(),
                    };
                    tracing::error!(
                        "fastcgi pool {}: bad response: {why}; {}",
                        pool.spec.name,
                        ex.who()
                    );
                    break fail(ex, 502).await;
                }
                Ok(Some((mut h, n))) => {
                    if role == Role::Authorizer {
                        if h.effective_status() == 200 && h.location.is_none() {
                            // §6.3: access granted; `Variable-NAME: value`
                            // headers are for the next handler. The body
                            // is not for anyone.
                            let vars = variables(&h);
                            out.clear();
                            if ended {
                                break End::Authorized(vars);
                            }
                            granted = Some(vars);
                            continue;
                        }
                        // Denied: the response goes to the client as it
                        // is, without the variables.
                        h.headers.retain(|(n, _)| variable_name(n).is_none());
                    } else if let Kind::LocalRedirect(loc) = h.kind() {
                        let loc = loc.to_vec();
                        if ended && !app_eof {
                            release(&mut up, &mut lease);
                        }
                        return Done::Redirect(loc);
                    }
                    out.drain(..n);
                    // The whole response already in hand goes out with a
                    // Content-Length, in one write.
                    let whole = (ended && !app_eof).then_some(out.len() as u64);
                    let body_done = !streaming || ex.body_done() || ended;
                    // A session cookie this process gave out sticks to it.
                    gateway::learn_session(
                        pool,
                        process,
                        h.headers.iter().map(|(n, v)| (n.as_bytes(), v.as_slice())),
                    );
                    let bodyless = response::start(&h, ex, body_done, whole);
                    // A head with no body yet goes out now (the application
                    // may take its time over the rest).
                    if out.is_empty() && !ended && !ex.flush().await {
                        break End::Abort;
                    }
                    down = Some(bodyless);
                }
            }
        }
        if let Some(bodyless) = down {
            if ended {
                // Queued: the connection loop writes it with what follows.
                if !bodyless && !client_gone {
                    ex.write(&out);
                }
                break End::Sent(!client_gone);
            }
            if !out.is_empty() && !bodyless && !client_gone && !response::send(ex, &out).await {
                break End::Abort;
            }
            out.clear();
            if app_eof {
                // Died mid-response: no last chunk, so the client sees the
                // truncation instead of taking it for a whole body.
                tracing::error!(
                    "fastcgi pool {}: connection lost mid-response; {}",
                    pool.spec.name,
                    ex.who()
                );
                break End::Abort;
            }
        }
    };
    match &result {
        // Not served: the connection may still carry the next one.
        End::Refused(_) => {
            if let (Some(u), Some(l)) = (up.take(), &lease) {
                u.finish(l);
            }
        }
        _ if ended => release(&mut up, &mut lease),
        _ => {}
    }
    match result {
        End::Abort => {
            ex.close();
            if let Some(u) = up {
                u.abort().await;
            }
            Done::Sent
        }
        End::Refused(ps) => Done::Refused(ps),
        End::TimedOut => {
            // Stopped at the application (§5.4), so a single-threaded one
            // is free for the next request.
            if let Some(u) = up {
                u.abort().await;
            }
            Done::TimedOut
        }
        End::Stale(r) => Done::Stale(r),
        End::Lost => Done::Lost,
        End::Authorized(v) => Done::Authorized(v),
        End::Sent(keep) => {
            if !keep {
                ex.close();
            }
            if down.is_some() {
                if streaming && !ex.body_done() {
                    ex.close();
                }
                ex.finish();
            }
            Done::Sent
        }
    }
}

/// Answers `status` at once (the connection closes after it) and ends the
/// exchange.
async fn fail(ex: &mut Exchange<'_>, status: u16) -> End {
    gateway::fail_now(ex, status).await;
    End::Abort
}

/// `Variable-NAME` → `NAME`, when NAME can be an environment variable.
fn variable_name(header: &str) -> Option<&str> {
    let prefix = header.get(..9)?;
    let name = &header[9..];
    (prefix.eq_ignore_ascii_case("variable-")
        && !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
    .then_some(name)
}

/// The variables an Authorizer's 200 grants.
fn variables(h: &stoa_cgi::ResponseHead) -> Vec<(String, Vec<u8>)> {
    h.headers
        .iter()
        .filter_map(|(n, v)| Some((variable_name(n)?.to_owned(), v.clone())))
        .collect()
}

fn log_stderr(pool: &str, data: &[u8], ex: &Exchange<'_>) {
    for line in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let shown = &line[..line.len().min(2048)];
        tracing::warn!(
            "fastcgi {pool}: {} ({})",
            String::from_utf8_lossy(shown).trim_end(),
            ex.who()
        );
    }
}

enum Step {
    Nothing,
    Up(UpStep),
    Body,
    ClientGone,
    Timeout,
}

// ---- configuration: `fastcgi = {...}` of a route ----

/// `fastcgi = {...}`: a route served by a FastCGI `[[pool]]`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FastCgiRouteConfig {
    /// The `[[pool]]` that serves this route.
    pub pool: String,
    /// Split SCRIPT_NAME and PATH_INFO after the first occurrence of this
    /// (`.php`) followed by '/' or the end of the path.
    pub split_path: Option<String>,
    /// Extra FastCGI parameters.
    #[serde(default)]
    pub params: std::collections::BTreeMap<String, String>,
    /// When a failed try goes again (nginx `fastcgi_next_upstream`).
    pub retries: Option<life::RetriesConfig>,
}

impl super::configure::Configure for FastCgiRouteConfig {
    fn configure(
        &self,
        cx: &super::configure::Ctx<'_>,
    ) -> Result<super::Handler, super::configure::Fail> {
        use super::configure::Fail;
        let pool = (cx.pool)(&self.pool, crate::upstream::Protocol::FastCgi)
            .map_err(Fail::at("fastcgi.pool"))?;
        if self.split_path.as_deref() == Some("") {
            return Err(Fail::new("fastcgi.split_path", "must not be empty"));
        }
        Ok(super::Handler::FastCgi(Arc::new(FastCgiRoute {
            pool,
            pool_name: self.pool.clone(),
            document_root: cx.site.document_root.clone(),
            split_path: self.split_path.clone(),
            params: self
                .params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            buffering: cx.request_buffering,
            retries: match &self.retries {
                Some(r) => r.validate().map_err(|e| Fail::new("fastcgi.retries", e))?,
                None => life::Retries::default(),
            },
        })))
    }

    fn runs_scripts(&self) -> bool {
        true
    }

    fn script_marker(&self) -> Option<&str> {
        self.split_path.as_deref()
    }

    fn splits_path(&self) -> bool {
        self.split_path.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorizer_variables_lose_their_prefix_spec_6_3() {
        assert_eq!(variable_name("Variable-AUTH_METHOD"), Some("AUTH_METHOD"));
        assert_eq!(variable_name("variable-user"), Some("user"));
        assert_eq!(variable_name("Variable-"), None);
        assert_eq!(variable_name("Variable-A=B"), None);
        assert_eq!(variable_name("X-Variable-A"), None);
        assert_eq!(variable_name("Varia"), None);
    }
}
