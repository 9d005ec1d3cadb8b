//! A worker: one thread, one current-thread tokio runtime, its own
//! SO_REUSEPORT listeners, caches and log buffer. Nothing on the request
//! path is shared with other workers except the connection counter.

use crate::config::Runtime;
use crate::conn;
use crate::handler::{ssi, static_files};
use crate::local::{Shared, Worker};
use crate::proto::stream::{cold, Rewind, Stream};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A listening socket and, when it speaks TLS, the address it was
/// configured as (to find its certificates in the current runtime).
pub struct Listener {
    pub socket: std::net::TcpListener,
    pub tls: Option<std::net::SocketAddr>,
    /// Its connections begin with a PROXY protocol header.
    pub proxy_protocol: bool,
}

/// A Unix-domain listening socket (`listen = ["unix:PATH"]`): every
/// worker accepts on the same one (no SO_REUSEPORT for Unix sockets).
pub struct UnixListener {
    pub socket: std::os::unix::net::UnixListener,
    pub proxy_protocol: bool,
}

/// The UDP side of a TLS listener that speaks HTTP/3: bound where the
/// TCP sockets are (by root before privileges drop, so port 443 works),
/// one per worker with SO_REUSEPORT, on the TCP socket's port.
pub struct UdpListener {
    pub socket: std::net::UdpSocket,
    /// The TLS address it belongs to, as configured.
    pub tls: std::net::SocketAddr,
}

/// One worker's listening sockets, whichever way they came (bound here,
/// from systemd, from the privileged parent, from a previous binary).
#[derive(Default)]
pub(crate) struct Sockets {
    pub tcp: Vec<Listener>,
    pub unix: Vec<UnixListener>,
    pub udp: Vec<UdpListener>,
}

/// What a connection's task is told about its listener.
#[derive(Clone, Copy)]
struct Via {
    /// The configured address of a TLS listener.
    tls: Option<std::net::SocketAddr>,
    /// A PROXY protocol header comes first.
    proxy_protocol: bool,
    unix: bool,
}

/// Decrements the shared and per-worker counts when a connection ends
/// (None: it parked, and `conn::park` counts it).
struct ConnGuard(Option<Rc<Worker>>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        if let Some(w) = self.0.take() {
            w.connection_closed();
        }
    }
}

/// Runs a worker until shutdown: accepts on its listeners, serves each
/// connection as a local task, and drains them when told to stop.
pub async fn run(
    listeners: Vec<Listener>,
    unix: Vec<UnixListener>,
    udp: Vec<UdpListener>,
    mut runtime: watch::Receiver<Arc<Runtime>>,
    shutdown: watch::Receiver<bool>,
    shared: Arc<Shared>,
) {
    let rt = runtime.borrow_and_update().clone();
    // Kept-alive connections move to a reloaded runtime between requests.
    conn::follow(runtime.clone());
    let worker = Rc::new(Worker::new(
        &rt.access_log,
        shutdown.clone(),
        shared.clone(),
    ));
    static_files::set_cache_limits(
        rt.cache.max_bytes,
        rt.cache.max_file_bytes,
        rt.cache.revalidate,
    );
    ssi::set_template_revalidate(rt.cache.revalidate);
    conn::park::start(worker.clone(), resume);
    let mut tokio_listeners = Vec::new();
    // The UDP side of TLS listeners that speak HTTP/3: same address, same
    // port number (what Alt-Svc tells clients).
    let mut quic = Vec::new();
    for u in udp {
        if let Some(e) = conn::h3::Endpoint::open(u.tls, u.socket, &rt) {
            if let Some(port) = e.port() {
                // The UDP socket took the TCP listener's port number.
                worker.advertise_h3(port, port);
            }
            quic.push(Rc::new(e));
        }
    }
    for l in listeners {
        match TcpListener::from_std(l.socket) {
            Ok(s) => tokio_listeners.push((
                Rc::new(s),
                Via {
                    tls: l.tls,
                    proxy_protocol: l.proxy_protocol,
                    unix: false,
                },
            )),
            Err(e) => tracing::error!("listener: {e}"),
        }
    }
    // The log is flushed off the request path, once a second.
    let flusher = {
        let worker = worker.clone();
        tokio::task::spawn_local(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                worker.flush_log();
                // The last counts of repeating errors that stopped.
                ACCEPT_ERRORS.flush();
            }
        })
    };
    let mut accepts = Vec::new();
    for e in &quic {
        accepts.push(tokio::task::spawn_local(
            e.clone().accept_loop(runtime.clone(), worker.clone()),
        ));
    }
    for (l, via) in &tokio_listeners {
        accepts.push(tokio::task::spawn_local(accept_loop(
            l.clone(),
            *via,
            runtime.clone(),
            worker.clone(),
            shared.clone(),
        )));
    }
    for l in unix {
        // SAFETY: the AsyncFd owns the listener, whose descriptor stays
        // open and the same until the AsyncFd drops it.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(
                l.socket,
                tokio::io::Interest::READABLE,
            )
        };
        match fd {
            Ok(fd) => accepts.push(tokio::task::spawn_local(crate::unix_listen::accept_loop(
                fd,
                l.proxy_protocol,
                runtime.clone(),
                worker.clone(),
                shared.clone(),
            ))),
            Err(e) => tracing::error!("unix listener: {e}"),
        }
    }
    let mut sd = shutdown.clone();
    loop {
        tokio::select! {
            r = runtime.changed() => {
                if r.is_err() { break; }
                let rt = runtime.borrow_and_update().clone();
                worker.set_access_log(&rt.access_log);
                static_files::set_cache_limits(rt.cache.max_bytes, rt.cache.max_file_bytes, rt.cache.revalidate);
                ssi::set_template_revalidate(rt.cache.revalidate);
                for e in &quic {
                    e.reload(&rt);
                }
            }
            r = sd.changed() => {
                if r.is_err() || *sd.borrow() { break; }
            }
        }
    }
    // Idle keep-alive connections close now; busy ones after their
    // response (they read the shutdown watch).
    worker.stop_idle();
    for a in &accepts {
        a.abort();
    }
    for e in &quic {
        e.stop();
    }
    drop(tokio_listeners);
    // Let in-flight requests finish; idle connections close themselves. A
    // graceful stop waits for all of them; a fast one (or a graceful one
    // turned fast) gives them `shutdown_timeout` from then.
    let limit = runtime.borrow().limits.shutdown_timeout;
    let mut until = None;
    while worker.active.get() > 0 {
        if !shared.graceful.load(Ordering::Relaxed) {
            let u = *until.get_or_insert_with(|| tokio::time::Instant::now() + limit);
            if tokio::time::Instant::now() >= u {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // What the last HTTP/3 connections sent is acknowledged (or they
    // are given up) before the sockets close.
    for e in &quic {
        e.close(Duration::from_secs(1)).await;
    }
    flusher.abort();
    worker.flush_log();
}

/// Failed accepts, logged once per interval with a count.
static ACCEPT_ERRORS: crate::log::Repeats = crate::log::Repeats::new(crate::log::REPEAT_INTERVAL);

async fn accept_loop(
    listener: Rc<TcpListener>,
    via: Via,
    runtime: watch::Receiver<Arc<Runtime>>,
    worker: Rc<Worker>,
    shared: Arc<Shared>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning, and
                // say it once with a count rather than 20 times a second.
                ACCEPT_ERRORS.warn(&format!("accept: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        serve(stream, peer, via, &runtime, &worker, &shared);
    }
}

/// A connection accepted on a Unix listener: served as a TCP one is (its
/// descriptor travels as a `TcpStream`; see `unix_listen`).
pub(crate) fn serve_unix(
    stream: tokio::net::TcpStream,
    proxy_protocol: bool,
    runtime: &watch::Receiver<Arc<Runtime>>,
    worker: &Rc<Worker>,
    shared: &Arc<Shared>,
) {
    let via = Via {
        tls: None,
        proxy_protocol,
        unix: true,
    };
    serve(
        stream,
        crate::unix_listen::PEER,
        via,
        runtime,
        worker,
        shared,
    );
}

/// Counts an accepted connection in (or refuses it past
/// `max_connections`) and spawns its task.
fn serve(
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    via: Via,
    runtime: &watch::Receiver<Arc<Runtime>>,
    worker: &Rc<Worker>,
    shared: &Arc<Shared>,
) {
    let tls = via.tls;
    {
        let rt = runtime.borrow().clone();
        let n = shared.connections.fetch_add(1, Ordering::Relaxed);
        if n >= rt.limits.max_connections {
            shared.connections.fetch_sub(1, Ordering::Relaxed);
            if tls.is_some() || via.proxy_protocol {
                // No plaintext answer makes sense to a TLS client, nor
                // before a PROXY header.
                return;
            }
            // Refuse politely without waiting on this client: one
            // non-blocking write, then close.
            let _ = stream.try_write(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n",
            );
            return;
        }
        worker.active.set(worker.active.get() + 1);
        let guard = ConnGuard(Some(worker.clone()));
        spawn(stream, peer, via, rt, worker.clone(), guard, false);
    }
}

/// A parked keep-alive connection (`conn::park`) with its next request
/// coming (or, for HTTP/2, its deadline or the stop): served by a task
/// again, its count kept.
fn resume(
    back: conn::park::Back,
    peer: std::net::SocketAddr,
    rt: Arc<Runtime>,
    worker: &Rc<Worker>,
) {
    let stream = match back {
        conn::park::Back::Http1(s) => s,
        conn::park::Back::H2(state) => {
            let mut guard = ConnGuard(Some(worker.clone()));
            let w = worker.clone();
            tokio::task::spawn_local(async move {
                if conn::h2::resume(state, peer, w, rt).await {
                    // Parked again: the lot counts it.
                    guard.0 = None;
                }
                drop(guard);
            });
            return;
        }
    };
    let via = Via {
        tls: None,
        proxy_protocol: false,
        unix: false,
    };
    let guard = ConnGuard(Some(worker.clone()));
    spawn(stream, peer, via, rt, worker.clone(), guard, true);
}

/// Spawns a connection's task (`resumed`: coming back from the lot).
fn spawn(
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    via: Via,
    rt: Arc<Runtime>,
    w: Rc<Worker>,
    mut guard: ConnGuard,
    resumed: bool,
) {
    let tls = via.tls;
    {
        // One task shape for both kinds, with `conn::h1::serve` called from
        // this one place and TLS behind boxes and virtual calls
        // (`stream::cold`): so the plaintext loop stays inlined into the
        // task as it was before TLS.
        tokio::task::spawn_local(async move {
            let mut peer = peer;
            if via.proxy_protocol {
                // The header's client replaces the balancer as the peer,
                // for everything after (logs, CGI, Forwarded, `allow`).
                let deadline = tokio::time::Instant::now() + rt.limits.header_timeout;
                let trusted = &rt.proxy_protocol.trusted;
                let read = conn::proxy_protocol::read(&stream, peer, via.unix, trusted, deadline);
                match cold(read).await {
                    Some(p) => peer = p,
                    None => return,
                }
            }
            let stream = match tls {
                None => Stream::Plain(stream),
                Some(addr) => match cold(conn::tls(stream, addr, peer, &rt, &w)).await {
                    Some((s, false)) => s,
                    Some((s, true)) => {
                        let conn = Rewind::new(Vec::new(), s);
                        if cold(conn::h2::serve(conn, peer, w, rt)).await {
                            guard.0 = None;
                        }
                        drop(guard);
                        return;
                    }
                    None => return,
                },
            };
            if conn::h1::serve(stream, peer, w, rt, resumed).await {
                // Parked: the lot counts it now.
                guard.0 = None;
            }
            drop(guard);
        });
    }
}
