//! Connection loops: read, parse, hand each request to routing through an
//! [`Exchange`](crate::exchange::Exchange), keep alive or close. They
//! never import handlers.

pub mod h1;
pub mod h2;
pub(crate) mod h3;
pub(crate) mod park;
pub mod proxy_protocol;

use crate::config::Runtime;
use crate::local::{Handshake, Worker};
use crate::proto::stream::Stream;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;

/// This worker's view of the configuration channel, and the newest
/// runtime it has seen.
struct Latest {
    rx: watch::Receiver<Arc<Runtime>>,
    rt: Arc<Runtime>,
}

thread_local! {
    /// Per worker; not in `local`, which cannot name the `Runtime`.
    static LATEST: RefCell<Option<Latest>> = const { RefCell::new(None) };
}

/// Makes [`refresh`] follow `rx` on this worker thread.
pub(crate) fn follow(mut rx: watch::Receiver<Arc<Runtime>>) {
    let rt = rx.borrow_and_update().clone();
    LATEST.with(|l| *l.borrow_mut() = Some(Latest { rx, rt }));
}

/// Moves a connection to the newest runtime, if a reload sent one since it
/// took `rt`: each request on a kept-alive connection (or HTTP/2 stream)
/// then uses the configuration, and the pools, current when it arrives.
/// The usual case costs a version check (one atomic load), no lock.
/// True when `rt` changed.
#[inline]
pub(crate) fn refresh(rt: &mut Arc<Runtime>) -> bool {
    // The usual case is checked inline, with a shared borrow; the update
    // is out of line, so that its frame is not set up for every request.
    let current = LATEST.with(|l| {
        let Ok(l) = l.try_borrow() else {
            return true;
        };
        l.as_ref()
            .is_none_or(|l| !l.rx.has_changed().unwrap_or(false) && Arc::ptr_eq(rt, &l.rt))
    });
    !current && refresh_slow(rt)
}

/// [`refresh`] after a reload (or on a connection that took an older
/// runtime): out of line.
#[cold]
#[inline(never)]
fn refresh_slow(rt: &mut Arc<Runtime>) -> bool {
    LATEST.with(|l| {
        let Ok(mut l) = l.try_borrow_mut() else {
            return false;
        };
        let Some(l) = l.as_mut() else {
            return false;
        };
        if l.rx.has_changed().unwrap_or(false) {
            l.rt = l.rx.borrow_and_update().clone();
        }
        if Arc::ptr_eq(rt, &l.rt) {
            return false;
        }
        *rt = l.rt.clone();
        true
    })
}

/// The TLS handshake of a connection to a TLS address, within
/// `header_timeout`, with the certificates `addr` has in the current
/// runtime: the stream and whether ALPN chose HTTP/2 (the caller then
/// runs `h2::serve`, else `h1::serve`). None: the handshake failed.
pub async fn tls(
    tcp: tokio::net::TcpStream,
    addr: SocketAddr,
    peer: SocketAddr,
    rt: &Runtime,
    worker: &Worker,
) -> Option<(Stream, bool)> {
    let Some((_, acceptor)) = rt.tls.iter().find(|(a, _)| *a == addr) else {
        tracing::warn!("{addr}: no TLS certificates in the running configuration");
        return None;
    };
    let deadline = tokio::time::Instant::now() + rt.limits.header_timeout;
    let r = acceptor.accept(tcp, deadline).await;
    let kind = match &r {
        Ok((s, _)) if s.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed) => {
            Handshake::Resumed
        }
        Ok(_) => Handshake::Full,
        Err(_) => Handshake::Failed,
    };
    if let Some(s) = worker.stats() {
        s.handshake(kind);
    }
    match r {
        Ok((stream, h2)) => Some((Stream::Tls(Box::new(stream)), h2)),
        Err(e) if refused_client_certificate(&e) => {
            // What an operator of `client_auth` needs to see (nginx logs
            // "client SSL certificate verify error" at info); other
            // failed handshakes are scanners' and broken clients' noise.
            tracing::info!("TLS handshake with {peer}: client certificate refused: {e}");
            None
        }
        Err(e) => {
            tracing::debug!("TLS handshake with {peer}: {e}");
            None
        }
    }
}

/// Whether a handshake failed on the client's certificate (a server
/// verifies no other): a bad one, or none where one is required.
fn refused_client_certificate(e: &std::io::Error) -> bool {
    matches!(
        e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()),
        Some(rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented)
    )
}
