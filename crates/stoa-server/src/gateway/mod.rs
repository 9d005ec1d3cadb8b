//! What every gateway to an application shares — CGI, FastCGI and the
//! proxy: the CGI meta-variables of a request, the request body read (and
//! spooled) before an application is taken, the client's side of a pump,
//! and an application's response head written to the
//! [`Exchange`](crate::exchange::Exchange) ([`response`]).

pub mod bufs;
pub(crate) mod life;
pub mod response;
pub(crate) mod spool;

pub use bufs::Bufs;

use crate::exchange::{BodyFail, Exchange, UpstreamAddr};
use crate::upstream::{Affinity, Lease, NoProcess, Pool};
use std::io;
use std::sync::Arc;

/// An application's address as the access and error logs name it:
/// `unix:/run/php.sock` or `127.0.0.1:9000` (nginx's `$upstream_addr`).
/// A TCP address stays a `SocketAddr`: written out only when a log line
/// needs it (see [`UpstreamAddr`]).
pub fn target_addr(t: &crate::upstream::Target) -> UpstreamAddr {
    match t {
        crate::upstream::Target::Unix(p) => UpstreamAddr::Named(format!("unix:{}", p.display())),
        crate::upstream::Target::Tcp(a) => UpstreamAddr::Tcp(*a),
        crate::upstream::Target::Tls(t) => UpstreamAddr::Tcp(t.addr),
    }
}

/// Request bodies are buffered in memory up to this, then in an unlinked
/// temporary file, so CONTENT_LENGTH can be exact.
const BODY_IN_MEMORY: usize = 256 * 1024;

/// The request body as the application will read it.
pub enum Input {
    None,
    /// A body of known length, streamed from the client as the
    /// application reads.
    Stream(u64),
    /// A body read whole first.
    Memory(Vec<u8>),
    File(std::fs::File, u64),
}

impl Input {
    /// Whether the body could be sent again (all of it is in hand).
    pub fn replayable(&self) -> bool {
        !matches!(self, Input::Stream(n) if *n > 0)
    }

    /// Makes the input readable again from its start, for a request sent
    /// anew; false for a body already (partly) taken from the client.
    pub fn rewind(&mut self) -> bool {
        match self {
            Input::None | Input::Memory(_) | Input::Stream(0) => true,
            Input::Stream(_) => false,
            Input::File(f, _) => std::io::Seek::rewind(f).is_ok(),
        }
    }

    /// CONTENT_LENGTH for the application.
    pub fn content_length(&self) -> Option<u64> {
        match self {
            Input::None => None,
            Input::Stream(n) => Some(*n),
            Input::Memory(v) => Some(v.len() as u64),
            Input::File(_, n) => Some(*n),
        }
    }
}

/// Where an application is, as its meta-variables name it.
pub struct Names<'a> {
    pub script_name: &'a str,
    pub path_info: &'a str,
    pub document_root: &'a str,
    pub script_filename: &'a str,
}

/// What the meta-variables take from the exchange besides the request
/// head: copied out, so that they can be made later without it (an SSI
/// page makes them only when it reads one).
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub peer: std::net::SocketAddr,
    pub local: Option<std::net::SocketAddr>,
    pub protocol: &'static str,
    pub https: bool,
    pub tls: Option<(&'static str, &'static str)>,
    /// The client's verified certificate (TLS).
    pub client_cert: Option<Arc<crate::http::client_cert::ClientCert>>,
}

impl ConnInfo {
    pub fn of(ex: &Exchange<'_>) -> ConnInfo {
        ConnInfo {
            peer: ex.peer(),
            local: ex.local_addr(),
            protocol: ex.protocol(),
            https: ex.scheme() == "https",
            tls: ex.tls_info(),
            client_cert: ex.client_cert(),
        }
    }
}

/// The CGI meta-variables of a request (RFC 3875 §4.1), for CGI scripts
/// and FastCGI applications alike.
pub fn meta_env(
    ex: &Exchange<'_>,
    names: Names<'_>,
    content_length: Option<u64>,
    pass_authorization: bool,
) -> stoa_cgi::Env {
    meta_env_of(
        ex.req(),
        &ConnInfo::of(ex),
        names,
        content_length,
        pass_authorization,
    )
}

/// [`meta_env`] from a request head and what was copied of its exchange.
pub fn meta_env_of(
    head: &stoa_h1::RequestHead,
    info: &ConnInfo,
    names: Names<'_>,
    content_length: Option<u64>,
    pass_authorization: bool,
) -> stoa_cgi::Env {
    let local = info.local;
    let peer = info.peer;
    let host = crate::http::host_name(head.host());
    let server_name = if host.is_empty() {
        local.map(|a| a.ip().to_string()).unwrap_or_default()
    } else {
        host.to_owned()
    };
    let req = stoa_cgi::Request {
        method: head.method.as_str(),
        script_name: names.script_name,
        path_info: names.path_info,
        query: head.query().unwrap_or(b""),
        request_uri: head.original_target(),
        protocol: info.protocol,
        server_software: concat!("stoa/", env!("CARGO_PKG_VERSION")),
        server_name: &server_name,
        server_port: local.map_or(0, |a| a.port()),
        remote_addr: Some(peer.ip()),
        remote_port: peer.port(),
        document_root: names.document_root,
        script_filename: names.script_filename,
        https: info.https,
        content_length,
        auth_type: None,
        remote_user: None,
        pass_authorization,
    };
    let mut env = stoa_cgi::meta_variables(&req, head.headers());
    if let Some((version, cipher)) = info.tls {
        // mod_ssl's names, which applications look for.
        env.set("SSL_PROTOCOL", version.as_bytes());
        env.set("SSL_CIPHER", cipher.as_bytes());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        crate::http::client_cert::ClientCert::set_env(info.client_cert.as_deref(), now, &mut env);
    }
    env
}

/// Adds an Authorizer's variables (FastCGI §6.3) to a handler's
/// environment, replacing any of the same name.
pub fn add_variables(env: &mut stoa_cgi::Env, extra: &[(String, Vec<u8>)]) {
    for (k, v) in extra {
        env.set(k, v);
    }
}

/// Answers with a status page; the connection stays if the request body
/// can still be skipped.
pub fn simple(ex: &mut Exchange<'_>, status: u16, extra: &[(&str, &[u8])]) {
    ex.error(status, extra);
    ex.finish();
}

/// Answers with a status page and closes the connection after it: for
/// failures after the request body was partly read, or the application
/// partly answered.
pub fn simple_now(ex: &mut Exchange<'_>, status: u16) {
    ex.close();
    ex.error(status, &[]);
    ex.finish();
}

/// Answers `status` and sends it at once (the connection closes after it).
pub async fn fail_now(ex: &mut Exchange<'_>, status: u16) {
    simple_now(ex, status);
    ex.flush().await;
}

/// The request body as an application gets it, read before a process is
/// taken: a slow client then holds only its connection, never a CGI slot
/// or a FastCGI process (nginx's `proxy_request_buffering`). Without
/// `buffering` a body of known length streams as the application reads;
/// one of unknown length (chunked) is always read first (CGI and FastCGI
/// need CONTENT_LENGTH). `None` when the request was answered (413, 400,
/// 408, 500) or the client left.
pub async fn read_input(ex: &mut Exchange<'_>, buffering: bool) -> Option<Input> {
    match ex.body_length() {
        Some(0) => return Some(Input::None),
        Some(n) if !buffering => return Some(Input::Stream(n)),
        _ => {}
    }
    match buffer_body(ex).await {
        Ok(i) => Some(i),
        Err(e) => {
            match e {
                BodyFail::TooLarge => simple_now(ex, 413),
                BodyFail::Malformed => simple_now(ex, 400),
                BodyFail::Slow => simple_now(ex, 408),
                BodyFail::Spool => simple_now(ex, 500),
                BodyFail::Gone => ex.close(),
            }
            None
        }
    }
}

/// Reads the whole request body: in memory up to [`BODY_IN_MEMORY`], then
/// in an unnamed temporary file.
pub async fn buffer_body(ex: &mut Exchange<'_>) -> Result<Input, BodyFail> {
    let mut mem = Vec::new();
    let mut file: Option<(std::fs::File, u64)> = None;
    loop {
        let more = ex.read_body(&mut mem).await?;
        if mem.len() > BODY_IN_MEMORY {
            use std::io::Write;
            let (f, n) = match &mut file {
                Some(x) => x,
                None => file.insert((temp_file().map_err(spool_failed)?, 0)),
            };
            f.write_all(&mem).map_err(spool_failed)?;
            *n += mem.len() as u64;
            mem.clear();
        }
        if !more {
            break;
        }
    }
    match file {
        None => Ok(Input::Memory(mem)),
        Some((mut f, n)) => {
            use std::io::{Seek, Write};
            f.write_all(&mem).map_err(spool_failed)?;
            f.seek(std::io::SeekFrom::Start(0)).map_err(spool_failed)?;
            Ok(Input::File(f, n + mem.len() as u64))
        }
    }
}

fn spool_failed(e: io::Error) -> BodyFail {
    tracing::error!("request body: temporary file: {e}");
    BodyFail::Spool
}

/// An unnamed temporary file (O_TMPFILE): nothing to clean up, ever.
fn temp_file() -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(std::env::temp_dir())
}

/// A slot on a process (or server) of `pool`, chosen by `key` (affinity)
/// and avoiding `skip`; `None` when none frees up (queue full, or
/// `queue_timeout`), logged with `kind` (the pool's protocol) and the
/// request: the caller answers (503 with `Retry-After`, or a gRPC status).
pub async fn lease_logged(
    pool: &Arc<Pool>,
    key: Option<&[u8]>,
    skip: Option<usize>,
    ex: &Exchange<'_>,
    kind: &str,
) -> Option<Lease> {
    match pool.lease(key, skip).await {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!(
                "{kind} pool {}: {} ({} waiting); 503; {}",
                pool.spec.name,
                match e {
                    NoProcess::QueueFull => "queue full",
                    NoProcess::Timeout => "none free in time",
                    NoProcess::Stopped => "stopped by a reload that removed it",
                },
                pool.waiting(),
                ex.who()
            );
            None
        }
    }
}

/// With `affinity = "cookie:NAME"`, a `Set-Cookie: NAME=value` in an
/// application's response makes later requests carrying that value go to
/// the process that set it (HAProxy's `stick store-response`): rendezvous
/// hashing alone would send a new session to whichever process the hash
/// picks, which does not know it.
pub fn learn_session<'h>(
    pool: &Pool,
    process: usize,
    headers: impl Iterator<Item = (&'h [u8], &'h [u8])>,
) {
    let Affinity::Cookie(name) = &pool.spec.affinity else {
        return;
    };
    if let Some(v) = set_cookie_value(headers, name) {
        pool.learn(v, process);
    }
}

/// The value `Set-Cookie: NAME=value; ...` gives cookie `name`, if any.
fn set_cookie_value<'h>(
    mut headers: impl Iterator<Item = (&'h [u8], &'h [u8])>,
    name: &str,
) -> Option<&'h [u8]> {
    headers.find_map(|(n, v)| {
        if !n.eq_ignore_ascii_case(b"set-cookie") {
            return None;
        }
        let pair = v.split(|&b| b == b';').next()?;
        let eq = pair.iter().position(|&b| b == b'=')?;
        let value = stoa_h1::trim(&pair[eq + 1..]);
        (stoa_h1::trim(&pair[..eq]) == name.as_bytes() && !value.is_empty()).then_some(value)
    })
}

/// What the client's side of a pump brought.
pub enum ClientEv {
    Body(Result<bool, BodyFail>),
    Gone,
    Nothing,
}

/// The client's side of a pump: the next piece of the request body when
/// the application wants it, else a watch for the client going away
/// (pipelined bytes that arrive meanwhile are kept for the next request).
pub async fn client_side(ex: &mut Exchange<'_>, dst: &mut Vec<u8>, want_body: bool) -> ClientEv {
    if want_body {
        return ClientEv::Body(ex.read_body(dst).await);
    }
    if ex.client_gone().await {
        ClientEv::Gone
    } else {
        ClientEv::Nothing
    }
}

/// The affinity key of a request, if the pool routes by one.
pub fn affinity_key(a: &Affinity, ex: &Exchange<'_>) -> Option<Vec<u8>> {
    let head = ex.req();
    match a {
        Affinity::None => None,
        Affinity::Header(h) => head.header(h).map(<[u8]>::to_vec),
        Affinity::ClientIp => Some(ex.peer().ip().to_string().into_bytes()),
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
