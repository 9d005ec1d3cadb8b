//! Connection loops: read, parse, hand each request to routing through an
//! [`Exchange`](crate::exchange::Exchange), keep alive or close. They
//! never import handlers.

pub mod h1;
pub mod h2;

use crate::config::Runtime;
use crate::local::Worker;
use crate::proto::stream::{Rewind, Stream};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

/// A connection to a TLS address: the handshake (within
/// `header_timeout`, with the certificates of `addr` in the current
/// runtime), then HTTP/2 if ALPN chose it, else HTTP/1.1.
pub async fn tls(
    tcp: tokio::net::TcpStream,
    addr: SocketAddr,
    peer: SocketAddr,
    worker: Rc<Worker>,
    rt: Arc<Runtime>,
) {
    let Some((_, acceptor)) = rt.tls.iter().find(|(a, _)| *a == addr) else {
        return;
    };
    let deadline = tokio::time::Instant::now() + rt.limits.header_timeout;
    let (stream, h2) = match acceptor.accept(tcp, deadline).await {
        Ok(x) => x,
        Err(e) => {
            tracing::debug!("TLS handshake with {peer}: {e}");
            return;
        }
    };
    let stream = Stream::Tls(Box::new(stream));
    if h2 {
        h2::serve(Rewind::new(Vec::new(), stream), peer, worker, rt).await;
    } else {
        h1::serve(stream, peer, worker, rt).await;
    }
}
