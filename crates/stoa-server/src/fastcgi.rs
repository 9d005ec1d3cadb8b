//! The FastCGI handler: a request goes to a process of a pool (see
//! `pool.rs`) over a kept-alive connection, as FastCGI records built by the
//! sans-IO `stoa-fastcgi` crate; the application's stdout goes through the
//! same CGI head parser and `Downstream` as a CGI script's.

use crate::cgi::{self, ClientEv, Input};
use crate::conn::{BodyFail, BodyReader, Ctx, Io};
use crate::downstream::Downstream;
use crate::pool::{Affinity, IdleConn, Lease, NoProcess, Pool, Target};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use stoa_cgi::{HeadError, Kind};
use stoa_fastcgi::gateway::{Connection, Event};
use stoa_fastcgi::{ProtocolStatus, Role};
use stoa_h1::{Framing, RequestHead};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::{sleep_until, Instant};

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
    /// SCRIPT_FILENAME is this root plus the request path.
    pub document_root: String,
}

/// A connection to an application process.
pub enum AppStream {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
}

impl AppStream {
    async fn connect(t: &Target) -> io::Result<AppStream> {
        match t {
            Target::Unix(p) => tokio::net::UnixStream::connect(p)
                .await
                .map(AppStream::Unix),
            Target::Tcp(a) => tokio::net::TcpStream::connect(a).await.map(AppStream::Tcp),
        }
    }

    /// Takes a kept-alive connection into this worker's event loop.
    fn from_idle(c: IdleConn) -> io::Result<AppStream> {
        match c {
            IdleConn::Unix(s) => tokio::net::UnixStream::from_std(s).map(AppStream::Unix),
            IdleConn::Tcp(s) => tokio::net::TcpStream::from_std(s).map(AppStream::Tcp),
        }
    }

    /// Leaves this worker's event loop so any worker can reuse it.
    fn into_idle(self) -> io::Result<IdleConn> {
        match self {
            AppStream::Unix(s) => s.into_std().map(IdleConn::Unix),
            AppStream::Tcp(s) => s.into_std().map(IdleConn::Tcp),
        }
    }
}

impl AsyncRead for AppStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            AppStream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            AppStream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for AppStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            AppStream::Unix(s) => Pin::new(s).poll_write(cx, buf),
            AppStream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            AppStream::Unix(s) => Pin::new(s).poll_flush(cx),
            AppStream::Tcp(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            AppStream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            AppStream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// The affinity key of a request, if the pool routes by one.
fn affinity_key(a: &Affinity, head: &RequestHead, io: &Io) -> Option<Vec<u8>> {
    match a {
        Affinity::None => None,
        Affinity::Header(h) => head.header(h).map(<[u8]>::to_vec),
        Affinity::ClientIp => Some(io.peer.ip().to_string().into_bytes()),
        Affinity::Cookie(name) => head
            .headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case(b"cookie"))
            .find_map(|(_, v)| {
                v.split(|&b| b == b';').find_map(|kv| {
                    let kv = stoa_h1::trim(kv);
                    let eq = kv.iter().position(|&b| b == b'=')?;
                    (stoa_h1::trim(&kv[..eq]) == name.as_bytes())
                        .then(|| stoa_h1::trim(&kv[eq + 1..]).to_vec())
                })
            }),
        Affinity::Query(name) => head.query().and_then(|q| {
            q.split(|&b| b == b'&').find_map(|kv| {
                let (k, v) = match kv.iter().position(|&b| b == b'=') {
                    Some(i) => (&kv[..i], &kv[i + 1..]),
                    None => (kv, &b""[..]),
                };
                (k == name.as_bytes()).then(|| v.to_vec())
            })
        }),
    }
}

/// Serves a request from a FastCGI pool. Returns whether the connection may
/// carry another request.
pub async fn serve(
    head: &RequestHead,
    route: &FastCgiRoute,
    norm: String,
    io: &mut Io,
    ctx: &Ctx<'_>,
) -> bool {
    let Some(pool) = ctx.rt.pools.get(route.pool).cloned() else {
        tracing::error!("fastcgi: pool {} is not running", route.pool_name);
        return cgi::simple(head, io, ctx, 503, &[]).await;
    };
    // FastCGI needs CONTENT_LENGTH: a chunked body is read whole first.
    let input = match head.framing {
        Framing::None => Input::None,
        Framing::Length(n) => Input::Stream(n),
        Framing::Chunked | Framing::Close => match cgi::buffer_body(head, io, ctx).await {
            Ok(i) => i,
            Err(BodyFail::TooLarge) => return cgi::simple_now(head, io, ctx, 413),
            Err(BodyFail::Malformed) => return cgi::simple_now(head, io, ctx, 400),
            Err(BodyFail::Gone) => return false,
        },
    };
    let filename = format!("{}{}", route.document_root.trim_end_matches('/'), norm);
    let names = cgi::Names {
        script_name: &norm,
        path_info: "",
        document_root: &route.document_root,
        script_filename: &filename,
    };
    // The application is the server's own business: Authorization passes
    // (php-fpm apps do their own authentication).
    let params = cgi::meta_env(head, io, names, input.content_length(), true);
    let key = affinity_key(&pool.spec.affinity, head, io);

    // A process that refuses the connection has not seen the request: try
    // another one.
    let mut skip = None;
    for _ in 0..pool.procs.len().clamp(1, 4) {
        let lease = match pool.lease(key.as_deref(), skip).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(
                    "fastcgi pool {}: {} ({} waiting); 503",
                    pool.spec.name,
                    if e == NoProcess::QueueFull {
                        "queue full"
                    } else {
                        "no process free in time"
                    },
                    pool.waiting()
                );
                return cgi::simple(head, io, ctx, 503, &[("Retry-After", b"1")]).await;
            }
        };
        let app = match lease.proc.take_idle().map(AppStream::from_idle) {
            Some(Ok(s)) => s,
            _ => match AppStream::connect(&lease.proc.target).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(
                        "fastcgi pool {}: process #{}: {e}",
                        pool.spec.name,
                        lease.proc.index
                    );
                    lease.failed();
                    skip = Some(lease.proc.index);
                    continue;
                }
            },
        };
        return exchange(head, io, ctx, &pool, lease, app, &params, input).await;
    }
    cgi::simple(head, io, ctx, 502, &[]).await
}

enum Done {
    /// The response was sent; whether the client connection stays.
    Sent(bool),
    /// Nothing was sent to the client and it must be closed.
    Abort,
}

#[allow(clippy::too_many_arguments)]
async fn exchange(
    head: &RequestHead,
    io: &mut Io,
    ctx: &Ctx<'_>,
    pool: &Arc<Pool>,
    lease: Lease,
    mut app: AppStream,
    params: &stoa_cgi::Env,
    input: Input,
) -> bool {
    let mut gw = Connection::new();
    let mut wbuf = Vec::with_capacity(4096);
    if lease.proc.ask_values() {
        gw.query_values(&mut wbuf);
    }
    let id = match gw.start_request(
        Role::Responder,
        true,
        params.iter().map(|(k, v)| (k.as_bytes(), v.as_slice())),
        &mut wbuf,
    ) {
        Ok(id) => id,
        Err(e) => {
            tracing::error!("fastcgi pool {}: {e}", pool.spec.name);
            return cgi::simple(head, io, ctx, 500, &[]).await;
        }
    };
    let mut reader = None;
    match input {
        Input::None => {
            let _ = gw.end_stdin(id, &mut wbuf);
        }
        Input::Memory(v) => {
            let _ = gw.stdin(id, &v, &mut wbuf);
            let _ = gw.end_stdin(id, &mut wbuf);
        }
        Input::File(mut f, _) => {
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                match std::io::Read::read(&mut f, &mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        let _ = gw.stdin(id, &chunk[..n], &mut wbuf);
                    }
                    Err(_) => return cgi::simple_now(head, io, ctx, 500),
                }
            }
            let _ = gw.end_stdin(id, &mut wbuf);
        }
        Input::Stream(_) => reader = Some(BodyReader::new(head, ctx.rt)),
    }
    let timeout = pool.spec.timeout;
    let mut deadline = Instant::now() + timeout;
    let mut wpos = 0usize;
    let mut incoming = Vec::new();
    let mut rbuf = vec![0u8; READ_CHUNK];
    let mut out: Vec<u8> = Vec::new();
    let mut down: Option<Downstream> = None;
    let mut ended = false;
    let mut app_eof = false;
    let mut client_gone = false;
    let body_done = |r: &Option<BodyReader>| r.as_ref().is_none_or(BodyReader::is_done);

    let result = loop {
        let want_body = reader.as_ref().is_some_and(|r| !r.is_done())
            && wpos >= wbuf.len()
            && incoming.is_empty();
        let writing = wpos < wbuf.len();
        let watch_client =
            !want_body && !client_gone && body_done(&reader) && io.rbuf.len() < 64 * 1024;
        let (mut rd, mut wr) = tokio::io::split(&mut app);
        let step = tokio::select! {
            biased;
            r = rd.read(&mut rbuf), if !app_eof => match r {
                Ok(0) | Err(_) => Step::AppEof,
                Ok(n) => Step::AppData(n),
            },
            r = wr.write(&wbuf[wpos..]), if writing => match r {
                Ok(n) if n > 0 => Step::Wrote(n),
                _ => Step::AppEof,
            },
            // The request body when the application can take more, else a
            // watch for the client leaving (its request is then abandoned).
            ev = cgi::client_side(&mut reader, io, &mut incoming, want_body), if want_body || watch_client => match ev {
                ClientEv::Body(Ok(_)) => Step::Body,
                ClientEv::Body(Err(_)) | ClientEv::Gone => Step::ClientGone,
                ClientEv::Nothing => Step::Nothing,
            },
            _ = sleep_until(deadline) => Step::Timeout,
        };
        drop((rd, wr));
        match step {
            Step::Nothing => continue,
            Step::Wrote(n) => {
                wpos += n;
                if wpos == wbuf.len() {
                    wbuf.clear();
                    wpos = 0;
                }
                continue;
            }
            Step::Body => {
                if !incoming.is_empty() {
                    let _ = gw.stdin(id, &incoming, &mut wbuf);
                    incoming.clear();
                }
                if body_done(&reader) {
                    let _ = gw.end_stdin(id, &mut wbuf);
                }
                continue;
            }
            Step::ClientGone => {
                if !down.as_ref().is_some_and(Downstream::is_complete) {
                    // Output still to come and nobody to read it: abort, so
                    // the process is free at once.
                    break Done::Abort;
                }
                // The whole body went out and only END_REQUEST is to come
                // (a client that closes as soon as it has the body): give
                // the application a moment, so the kept-alive connection and
                // the request count survive.
                client_gone = true;
                deadline = deadline.min(Instant::now() + std::time::Duration::from_secs(1));
                continue;
            }
            Step::Timeout => {
                if client_gone {
                    break Done::Abort;
                }
                if down.is_none() {
                    tracing::error!(
                        "fastcgi pool {}: no response within {:?}",
                        pool.spec.name,
                        timeout
                    );
                    cgi::simple_now(head, io, ctx, 504);
                    io.flush(ctx.rt).await;
                } else {
                    tracing::error!(
                        "fastcgi pool {}: no output for {:?}",
                        pool.spec.name,
                        timeout
                    );
                }
                break Done::Abort;
            }
            Step::AppEof => {
                app_eof = true;
                let _ = gw.eof();
            }
            Step::AppData(n) => {
                deadline = Instant::now() + timeout;
                if let Err(e) = gw.feed(&rbuf[..n]) {
                    tracing::error!("fastcgi pool {}: protocol error: {e}", pool.spec.name);
                    app_eof = true;
                }
            }
        }
        // Events from what was read.
        let mut refused = None;
        while let Some(ev) = gw.poll_event() {
            match ev {
                Event::Stdout { data, .. } => out.extend_from_slice(&data),
                Event::Stderr { data, .. } => {
                    for line in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                        let shown = &line[..line.len().min(2048)];
                        tracing::warn!(
                            "fastcgi {}: {}",
                            pool.spec.name,
                            String::from_utf8_lossy(shown).trim_end()
                        );
                    }
                }
                Event::Values(v) => lease.proc.learn(&v, &pool.spec.name),
                Event::End {
                    protocol_status, ..
                } => {
                    ended = true;
                    lease.proc.values_settled(&pool.spec);
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
            if down.is_none() && out.is_empty() {
                tracing::warn!(
                    "fastcgi pool {}: application refused the request ({ps:?}); 503",
                    pool.spec.name
                );
                break Done::Sent(cgi::simple(head, io, ctx, 503, &[("Retry-After", b"1")]).await);
            }
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
                    tracing::error!("fastcgi pool {}: bad response: {why}", pool.spec.name);
                    cgi::simple_now(head, io, ctx, 502);
                    io.flush(ctx.rt).await;
                    break Done::Abort;
                }
                Ok(Some((h, n))) => {
                    if let Kind::LocalRedirect(loc) = h.kind() {
                        let loc = loc.to_vec();
                        let reusable = ended && !app_eof && !gw.is_closing();
                        finish_app(&lease, app, reusable);
                        drop(lease);
                        return cgi::redirect(head, &loc, io, ctx, 0, body_done(&reader)).await;
                    }
                    out.drain(..n);
                    let d = Downstream::start(&h, head, io, ctx, body_done(&reader) || ended);
                    if !io.flush(ctx.rt).await {
                        break Done::Abort;
                    }
                    down = Some(d);
                }
            }
        }
        if let Some(d) = down.as_mut() {
            if !out.is_empty() && !d.bodyless && !client_gone && !d.send(&out, io, ctx).await {
                break Done::Abort;
            }
            out.clear();
            if ended {
                break Done::Sent(!client_gone);
            }
            if app_eof {
                // Died mid-response: no last chunk, so the client sees the
                // truncation instead of taking it for a whole body.
                tracing::error!(
                    "fastcgi pool {}: connection lost mid-response",
                    pool.spec.name
                );
                break Done::Abort;
            }
        }
    };
    let clean = ended && !app_eof && !gw.is_closing() && wpos >= wbuf.len();
    match result {
        Done::Abort => {
            if !ended && !app_eof {
                // Tell the application to stop (§5.4), so a single-threaded
                // one is free for the next request, then close: the
                // connection's state is unknown.
                let mut abort = Vec::new();
                if gw.abort(id, &mut abort).is_ok() {
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_millis(100),
                        app.write_all(&abort),
                    )
                    .await;
                }
            }
            drop(app);
            if ended {
                lease.served();
            }
            false
        }
        Done::Sent(keep) => {
            lease.served();
            let Some(d) = down else {
                finish_app(&lease, app, clean);
                return keep;
            };
            if !ended {
                tracing::error!(
                    "fastcgi pool {}: connection lost mid-response",
                    pool.spec.name
                );
            }
            finish_app(&lease, app, clean);
            let bd = body_done(&reader);
            d.finish(head, io, ctx, bd) && keep && ended
        }
    }
}

/// Returns a connection to its process's stash when it can carry another
/// request; otherwise it is closed.
fn finish_app(lease: &Lease, app: AppStream, reusable: bool) {
    if reusable {
        if let Ok(c) = app.into_idle() {
            lease.proc.put_idle(c);
        }
    }
}

enum Step {
    Nothing,
    AppData(usize),
    AppEof,
    Wrote(usize),
    Body,
    ClientGone,
    Timeout,
}
