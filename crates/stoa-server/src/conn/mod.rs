//! Connection loops: read, parse, hand each request to routing through an
//! [`Exchange`](crate::exchange::Exchange), keep alive or close. They
//! never import handlers.

pub mod h1;
pub mod h2;
pub mod proxy_protocol;

use crate::config::Runtime;
use crate::local::{Handshake, Worker};
use crate::proto::stream::Stream;
use std::net::SocketAddr;

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
        Err(e) => {
            tracing::debug!("TLS handshake with {peer}: {e}");
            None
        }
    }
}
