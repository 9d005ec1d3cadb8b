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
}

/// Decrements the shared and per-worker counts when a connection ends.
struct ConnGuard {
    shared: Arc<Shared>,
    worker: Rc<Worker>,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.shared.connections.fetch_sub(1, Ordering::Relaxed);
        self.worker.active.set(self.worker.active.get() - 1);
    }
}

/// Runs a worker until shutdown: accepts on its listeners, serves each
/// connection as a local task, and drains them when told to stop.
pub async fn run(
    listeners: Vec<Listener>,
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
    let mut tokio_listeners = Vec::new();
    for l in listeners {
        match TcpListener::from_std(l.socket) {
            Ok(s) => tokio_listeners.push((Rc::new(s), l.tls)),
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
    for (l, tls) in &tokio_listeners {
        accepts.push(tokio::task::spawn_local(accept_loop(
            l.clone(),
            *tls,
            runtime.clone(),
            worker.clone(),
            shared.clone(),
        )));
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
    flusher.abort();
    worker.flush_log();
}

/// Failed accepts, logged once per interval with a count.
static ACCEPT_ERRORS: crate::log::Repeats = crate::log::Repeats::new(crate::log::REPEAT_INTERVAL);

async fn accept_loop(
    listener: Rc<TcpListener>,
    tls: Option<std::net::SocketAddr>,
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
        let rt = runtime.borrow().clone();
        let n = shared.connections.fetch_add(1, Ordering::Relaxed);
        if n >= rt.limits.max_connections {
            shared.connections.fetch_sub(1, Ordering::Relaxed);
            if tls.is_some() {
                // No plaintext answer makes sense to a TLS client.
                continue;
            }
            // Refuse politely without waiting on this client: one
            // non-blocking write, then close.
            let _ = stream.try_write(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n",
            );
            continue;
        }
        worker.active.set(worker.active.get() + 1);
        let guard = ConnGuard {
            shared: shared.clone(),
            worker: worker.clone(),
        };
        let w = worker.clone();
        // One task shape for both kinds, with `conn::h1::serve` called from
        // this one place and TLS behind boxes and virtual calls
        // (`stream::cold`): so the plaintext loop stays inlined into the
        // task as it was before TLS.
        tokio::task::spawn_local(async move {
            let stream = match tls {
                None => Stream::Plain(stream),
                Some(addr) => match cold(conn::tls(stream, addr, peer, &rt, &w)).await {
                    Some((s, false)) => s,
                    Some((s, true)) => {
                        let conn = Rewind::new(Vec::new(), s);
                        cold(conn::h2::serve(conn, peer, w, rt)).await;
                        drop(guard);
                        return;
                    }
                    None => return,
                },
            };
            conn::h1::serve(stream, peer, w, rt).await;
            drop(guard);
        });
    }
}
