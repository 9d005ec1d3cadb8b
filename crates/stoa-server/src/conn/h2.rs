//! One HTTP/2 connection (after ALPN `h2`, or with prior knowledge over
//! cleartext), driven with the `h2` crate: this task owns the connection
//! and accepts streams; each stream is a task of its own on the worker's
//! runtime, which builds the request head, routes it and runs the
//! handler through an [`Exchange`] over [`H2Stream`], exactly as an
//! HTTP/1 request would be. See docs/ARCHITECTURE.md, "Lifecycle of an
//! HTTP/2 request".

use crate::config::Runtime;
use crate::exchange::{Edge, Exchange};
use crate::local::Proto;
use crate::local::Worker;
use crate::proto::flood::Guard;
use crate::proto::h2::H2Stream;
use crate::proto::stream::Rewind;
use crate::route;
use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use stoa_h1::{Framing, Method, RequestHead, Version};
use tokio::time::Instant;

/// How long a connection that was told to go away (GOAWAY) may take to
/// end before it is dropped: a client that stops reading cannot even be
/// sent its GOAWAY.
const GOAWAY_GRACE: Duration = Duration::from_secs(2);

/// Keeps the connection's count of live stream tasks, and the worker's.
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

/// Counts the connection as open for its protocol until it ends.
struct Open {
    worker: Rc<Worker>,
    proto: Proto,
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(s) = self.worker.stats() {
            s.closed(self.proto);
        }
    }
}

/// Serves an HTTP/2 connection until the client or the server ends it.
pub async fn serve(io: Rewind, peer: SocketAddr, worker: Rc<Worker>, rt: Arc<Runtime>) {
    let mut rt = rt;
    let local = io.inner.local_addr().ok();
    let raw = std::os::fd::AsRawFd::as_raw_fd(io.inner.tcp());
    let tls = io.inner.tls_info();
    let _ = io.inner.set_nodelay(true);
    let l = &rt.http2;
    let (io, alarm) = Guard::new(io, l.max_control_frames);
    let mut b = h2::server::Builder::new();
    b.initial_window_size(l.initial_window_size)
        .initial_connection_window_size(l.initial_connection_window_size)
        .max_frame_size(l.max_frame_size)
        .max_header_list_size(l.max_header_list_size)
        .max_concurrent_streams(l.max_concurrent_streams)
        .max_send_buffer_size(l.max_send_buffer)
        .max_pending_accept_reset_streams(l.max_pending_accept_reset_streams)
        .max_local_error_reset_streams(Some(l.max_local_error_reset_streams));
    let deadline = Instant::now() + rt.limits.header_timeout;
    let mut conn = match tokio::time::timeout_at(deadline, b.handshake::<_, Bytes>(io)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            tracing::debug!("h2 {peer}: handshake: {e}");
            return;
        }
        Err(_) => return,
    };
    let is_tls = tls.is_some();
    let proto = if is_tls { Proto::H2 } else { Proto::H2c };
    if let Some(s) = worker.stats() {
        s.opened(proto);
    }
    let _open = Open {
        worker: worker.clone(),
        proto,
    };
    let live = Rc::new(Cell::new(0usize));
    let mut shutdown = worker.shutdown.clone();
    let mut closing = false;
    // Told to go away and not gone by then: dropped.
    let mut gone_by: Option<Instant> = None;
    if *shutdown.borrow() {
        conn.graceful_shutdown();
        closing = true;
    }
    let max_live = 2 * l.max_concurrent_streams as usize;
    let mut idle_until = Instant::now() + rt.limits.keepalive_timeout;
    loop {
        tokio::select! {
            r = conn.accept() => match r {
                Some(Ok((req, respond))) => {
                    if live.get() >= max_live {
                        // Streams come faster than their tasks end: a
                        // client opening and cancelling streams without
                        // end (CVE-2023-44487) gets GOAWAY.
                        tracing::warn!("h2 {peer}: too many streams in progress, closing");
                        conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                        gone_by.get_or_insert(Instant::now() + GOAWAY_GRACE);
                        continue;
                    }
                    live.set(live.get() + 1);
                    if let Some(s) = worker.stats() {
                        s.stream_opened(is_tls);
                    }
                    let guard = Live {
                        count: live.clone(),
                        worker: worker.clone(),
                        tls: is_tls,
                    };
                    let worker = worker.clone();
                    // A reload since the last stream: this one uses the
                    // new configuration (the connection's own settings,
                    // agreed at its start, stay).
                    super::refresh(&mut rt);
                    let rt = rt.clone();
                    tokio::task::spawn_local(async move {
                        stream(req, respond, peer, local, tls, &worker, &rt).await;
                        drop(guard);
                    });
                }
                Some(Err(e)) => {
                    tracing::debug!("h2 {peer}: {e}");
                    break;
                }
                None => break,
            },
            () = alarm.notify.notified() => {
                let what = alarm.flood().map_or("frames", |f| f.describe());
                tracing::warn!("h2 {peer}: flood of {what}: GOAWAY ENHANCE_YOUR_CALM");
                conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                closing = true;
                gone_by.get_or_insert(Instant::now() + GOAWAY_GRACE);
            }
            r = shutdown.changed(), if !closing => {
                if r.is_err() || *shutdown.borrow() {
                    // GOAWAY: streams in progress finish, no new ones.
                    conn.graceful_shutdown();
                    closing = true;
                    idle_until = Instant::now() + rt.limits.keepalive_timeout;
                }
            }
            () = tokio::time::sleep_until(gone_by.unwrap_or(idle_until)), if gone_by.is_some() => {
                tracing::debug!("h2 {peer}: did not end after GOAWAY, dropped");
                break;
            }
            _ = tokio::time::sleep_until(idle_until) => {
                if live.get() == 0 {
                    if closing {
                        // GOAWAY went (or could not go) a whole idle
                        // period ago: a client that does not read.
                        break;
                    }
                    conn.graceful_shutdown();
                    closing = true;
                }
                idle_until = Instant::now() + rt.limits.keepalive_timeout;
            }
        }
    }
    if worker.is_stopping() {
        // The process exits soon: the connection's last frames must reach
        // the client before the socket is let go (see `proto::settle`).
        // Dropping the connection closes its descriptor; a second one
        // keeps the socket until then.
        if let Some(fd) = crate::proto::settle::hold(raw) {
            drop(conn);
            crate::proto::settle::settle(std::os::fd::AsFd::as_fd(&fd), rt.limits.send_timeout)
                .await;
        }
    }
}

/// One stream: the request head from its pseudo-headers and fields, then
/// routing and the handler, then the end of the response.
async fn stream(
    req: http::Request<RecvStream>,
    respond: SendResponse<Bytes>,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    tls: Option<(&'static str, &'static str)>,
    worker: &Worker,
    rt: &Runtime,
) {
    let (parts, body) = req.into_parts();
    let expect_continue = parts
        .headers
        .get(http::header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let mut side = H2Stream::new(respond, body, peer, local, tls, expect_continue);
    if side.was_reset() {
        return;
    }
    let head = request_head(&parts, side.body_done());
    let (mut hsts, mut edge) = (None, Edge::none());
    let (p, rewritten) = route::pick_request(&head, rt, tls.is_some(), &mut hsts, &mut edge);
    let head = rewritten.as_ref().unwrap_or(&head);
    let truncated = {
        let mut ex = Exchange::h2(&mut side, head, worker, &rt.limits)
            .with_hsts(hsts)
            .with_edge(edge);
        route::run(p, &mut ex, rt, 0).await;
        ex.truncated()
    };
    if truncated {
        side.reset();
        return;
    }
    if side.flush(true, rt.limits.send_timeout).await {
        side.drain().await;
    }
}

/// The request as an HTTP/1.1 head, which is what routing and handlers
/// read: `:authority` becomes Host (RFC 9113 §8.3.1), split `cookie`
/// fields are joined with "; " (§8.2.3), the body's framing is its
/// content-length or unknown.
fn request_head(parts: &http::request::Parts, ended: bool) -> RequestHead {
    let method = match parts.method {
        http::Method::GET => Method::Get,
        http::Method::HEAD => Method::Head,
        http::Method::POST => Method::Post,
        http::Method::PUT => Method::Put,
        http::Method::DELETE => Method::Delete,
        http::Method::OPTIONS => Method::Options,
        http::Method::PATCH => Method::Patch,
        http::Method::TRACE => Method::Trace,
        http::Method::CONNECT => Method::Connect,
        ref m => Method::Other(m.as_str().to_owned()),
    };
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let target = if method == Method::Options && target == "/*" {
        "*"
    } else {
        target
    };
    let authority = parts.uri.authority().map(|a| a.as_str());
    let mut cookie: Vec<u8> = Vec::new();
    let mut fields: Vec<(&[u8], &[u8])> = Vec::with_capacity(parts.headers.len() + 1);
    if let Some(a) = authority {
        fields.push((b"host", a.as_bytes()));
    }
    for (name, value) in &parts.headers {
        if name == http::header::HOST && authority.is_some() {
            continue;
        }
        if name == http::header::COOKIE {
            if !cookie.is_empty() {
                cookie.extend_from_slice(b"; ");
            }
            cookie.extend_from_slice(value.as_bytes());
            continue;
        }
        fields.push((name.as_str().as_bytes(), value.as_bytes()));
    }
    if !cookie.is_empty() {
        fields.push((b"cookie", &cookie));
    }
    let length = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| stoa_h1::parse_u64(v.as_bytes()));
    let mut head = RequestHead::from_parts(method, target.as_bytes(), Version::Http11, fields);
    head.framing = match (ended, length) {
        (true, _) => Framing::None,
        (false, Some(n)) => Framing::Length(n),
        // Delimited by END_STREAM: like chunked, its length is known at
        // its end only.
        (false, None) => Framing::Chunked,
    };
    head.expect_continue = false;
    head
}
