//! The CGI/1.1 handler (RFC 3875): resolve the script, spawn it in its own
//! process group, pump the request body into its stdin and its stdout to
//! the client with backpressure, and clean up whatever happens.
//!
//! Meta-variables and the script's response head come from `stoa-cgi`, the
//! sans-IO crate FastCGI shares.

use crate::config::Dur;
use crate::conn::{self, BodyFail, BodyReader, Ctx, Io};
use crate::downstream::Downstream;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use stoa_cgi::{HeadError, Kind};
use stoa_h1::{Framing, RequestHead, RequestLimits, Version};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::Semaphore;
use tokio::time::{sleep_until, Instant};

/// Local redirects followed before giving up (RFC 3875 §6.2.2 loops).
pub(crate) const MAX_REDIRECTS: u8 = 10;
/// Largest script head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Output read from a script at a time; with the pipe's own buffer this
/// bounds what a slow client makes Stoa hold per request.
const OUT_CHUNK: usize = 32 * 1024;
/// Chunked request bodies are buffered in memory up to this, then in an
/// unlinked temporary file, so CONTENT_LENGTH can be exact.
const BODY_IN_MEMORY: usize = 256 * 1024;

/// How a route finds the program to run.
#[derive(Debug)]
pub enum Mode {
    /// Every executable file under `dir` is a script; the route's prefix
    /// maps onto `dir`.
    Dir { dir: PathBuf, prefix: String },
    /// Files under the site root are run by `program` (php-cgi, perl...).
    Interpreter { program: PathBuf, root: PathBuf },
    /// One program serves the whole prefix (Apache `ScriptAlias /cgit
    /// /usr/lib/cgit/cgit.cgi`); the rest of the path is PATH_INFO.
    Script { program: PathBuf, prefix: String },
}

/// A CGI route, validated.
#[derive(Debug)]
pub struct CgiConfig {
    pub mode: Mode,
    pub timeout: Duration,
    pub pass_authorization: bool,
    pub document_root: String,
    /// Environment passed through from Stoa's own (`[cgi] pass_env`).
    pub env: Arc<Vec<(String, String)>>,
    /// The route's own variables (`env = {...}`), set last.
    pub route_env: Vec<(String, String)>,
    pub limiter: Arc<Limiter>,
    /// Read the request body before taking a process slot.
    pub buffering: bool,
}

impl CgiConfig {
    /// For a directory path under a `dir` route, the first of the site's
    /// index names that is an executable script there (gitweb's
    /// `index.cgi`): routing runs it as an internal redirect.
    pub fn dir_index<'n>(&self, norm: &str, names: &'n [String]) -> Option<&'n str> {
        let Mode::Dir { dir, prefix } = &self.mode else {
            return None;
        };
        let rest = norm.strip_prefix(prefix.as_str())?;
        if !rest.ends_with('/') {
            return None;
        }
        let d = dir.join(rest.trim_start_matches('/'));
        names
            .iter()
            .find(|n| {
                std::fs::metadata(d.join(n))
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
            .map(String::as_str)
    }
}

/// A route's `cgi = {...}` table, paths resolved.
pub struct RouteSpec {
    pub dir: Option<PathBuf>,
    pub interpreter: Option<PathBuf>,
    pub script: Option<PathBuf>,
    pub timeout: Option<Dur>,
    pub pass_authorization: bool,
    pub env: Vec<(String, String)>,
    pub buffering: bool,
}

/// Bounds concurrent CGI processes across all workers, with a bounded
/// queue of waiting requests.
#[derive(Debug)]
pub struct Limiter {
    sem: Semaphore,
    waiting: AtomicUsize,
    pub max_queue: usize,
    pub queue_timeout: Duration,
}

impl Limiter {
    pub fn new(max_processes: usize, max_queue: usize, queue_timeout: Duration) -> Limiter {
        Limiter {
            sem: Semaphore::new(max_processes.max(1)),
            waiting: AtomicUsize::new(0),
            max_queue,
            queue_timeout,
        }
    }

    async fn acquire(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        if let Ok(p) = self.sem.try_acquire() {
            return Some(p);
        }
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= self.max_queue {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let r = tokio::time::timeout(self.queue_timeout, self.sem.acquire()).await;
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        r.ok().and_then(Result::ok)
    }
}

/// The `[cgi]` section, validated: shared by every CGI route.
#[derive(Debug, Clone)]
pub struct Globals {
    pub env: Arc<Vec<(String, String)>>,
    pub limiter: Arc<Limiter>,
}

/// Builds a route's CGI config from its table.
pub fn route_config(
    spec: RouteSpec,
    prefix: Option<&str>,
    site_root: Option<PathBuf>,
    globals: &Globals,
) -> Result<CgiConfig, String> {
    let RouteSpec {
        dir,
        interpreter,
        script,
        timeout,
        pass_authorization,
        env: route_env,
        buffering,
    } = spec;
    let mode = match (dir, interpreter, script) {
        (None, None, Some(program)) => {
            let program = program
                .canonicalize()
                .map_err(|e| format!("script `{}`: {e}", program.display()))?;
            let meta = std::fs::metadata(&program)
                .map_err(|e| format!("script `{}`: {e}", program.display()))?;
            if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
                return Err(format!(
                    "script `{}` is not an executable file",
                    program.display()
                ));
            }
            let Some(prefix) = prefix else {
                return Err("`script` needs a `prefix` route (the prefix runs the script)".into());
            };
            Mode::Script {
                program,
                prefix: prefix.trim_end_matches('/').to_owned(),
            }
        }
        (Some(d), None, None) => {
            let dir = d
                .canonicalize()
                .map_err(|e| format!("dir `{}`: {e}", d.display()))?;
            if !dir.is_dir() {
                return Err(format!("dir `{}` is not a directory", dir.display()));
            }
            let Some(prefix) = prefix else {
                return Err(
                    "`dir` needs a `prefix` route (the prefix maps onto the directory)".into(),
                );
            };
            Mode::Dir {
                dir,
                prefix: prefix.trim_end_matches('/').to_owned(),
            }
        }
        (None, Some(program), None) => {
            if !program.is_file() {
                return Err(format!(
                    "interpreter `{}` does not exist",
                    program.display()
                ));
            }
            let Some(root) = site_root.clone() else {
                return Err(
                    "`interpreter` runs files under the site's `root`, and the site has none"
                        .into(),
                );
            };
            let root = root
                .canonicalize()
                .map_err(|e| format!("root `{}`: {e}", root.display()))?;
            Mode::Interpreter { program, root }
        }
        _ => return Err("give exactly one of `dir`, `interpreter` or `script`".into()),
    };
    let document_root = match (&site_root, &mode) {
        (Some(r), _) => r
            .canonicalize()
            .unwrap_or_else(|_| r.clone())
            .display()
            .to_string(),
        (None, Mode::Dir { dir, .. }) => dir.display().to_string(),
        (None, Mode::Interpreter { root, .. }) => root.display().to_string(),
        (None, Mode::Script { program, .. }) => program
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    };
    Ok(CgiConfig {
        mode,
        timeout: timeout.map_or(Duration::from_secs(30), |d| d.0),
        pass_authorization,
        document_root,
        env: globals.env.clone(),
        route_env,
        limiter: globals.limiter.clone(),
        buffering,
    })
}

/// A resolved script.
struct Script {
    program: PathBuf,
    /// The script file (SCRIPT_FILENAME), passed as the argument when an
    /// interpreter runs it.
    filename: PathBuf,
    script_name: String,
    path_info: String,
    nph: bool,
}

/// Finds the script for a normalized path, or the status to answer.
fn resolve(cfg: &CgiConfig, norm: &str) -> Result<Script, u16> {
    match &cfg.mode {
        Mode::Dir { dir, prefix } => {
            // The route matched the raw path; the normalized one must still
            // be inside the prefix (`/cgi-bin/../x` is not a script).
            let rest = norm.strip_prefix(prefix.as_str()).ok_or(404u16)?;
            if !rest.starts_with('/') || rest.len() < 2 {
                return Err(if rest.is_empty() || rest == "/" {
                    403
                } else {
                    404
                });
            }
            let segs: Vec<&str> = rest[1..].split('/').collect();
            // The longest existing file is the script; the rest is PATH_INFO.
            for k in (1..=segs.len()).rev() {
                if segs[k - 1].is_empty() {
                    continue;
                }
                let rel = segs[..k].join("/");
                let candidate = dir.join(&rel);
                let Ok(meta) = std::fs::metadata(&candidate) else {
                    continue;
                };
                if meta.is_dir() {
                    // A directory is never run, and nothing below it was.
                    return Err(403);
                }
                if !meta.is_file() {
                    return Err(403);
                }
                let canon = candidate.canonicalize().map_err(|_| 404u16)?;
                if !canon.starts_with(dir) {
                    return Err(403);
                }
                if meta.permissions().mode() & 0o111 == 0 {
                    // Scripts are run, never shown as source.
                    return Err(403);
                }
                let path_info = if k < segs.len() {
                    format!("/{}", segs[k..].join("/"))
                } else {
                    String::new()
                };
                let nph = segs[k - 1].starts_with("nph-");
                return Ok(Script {
                    program: canon.clone(),
                    filename: canon,
                    script_name: format!("{prefix}/{rel}"),
                    path_info,
                    nph,
                });
            }
            Err(404)
        }
        Mode::Script { program, prefix } => {
            let rest = norm.strip_prefix(prefix.as_str()).ok_or(404u16)?;
            if !rest.is_empty() && !rest.starts_with('/') {
                // `/cgitx` is not under the prefix `/cgit`.
                return Err(404);
            }
            let nph = program
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("nph-"));
            Ok(Script {
                program: program.clone(),
                filename: program.clone(),
                script_name: prefix.clone(),
                path_info: rest.to_owned(),
                nph,
            })
        }
        Mode::Interpreter { program, root } => {
            let candidate = root.join(norm.trim_start_matches('/'));
            let meta = std::fs::metadata(&candidate).map_err(|_| 404u16)?;
            if !meta.is_file() {
                return Err(if meta.is_dir() { 403 } else { 404 });
            }
            let canon = candidate.canonicalize().map_err(|_| 404u16)?;
            if !canon.starts_with(root) {
                return Err(403);
            }
            let nph = norm
                .rsplit('/')
                .next()
                .is_some_and(|n| n.starts_with("nph-"));
            Ok(Script {
                program: program.clone(),
                filename: canon,
                script_name: norm.to_owned(),
                path_info: String::new(),
                nph,
            })
        }
    }
}

/// Kills the script's whole process group unless disarmed: every early
/// return (timeout, bad head, client gone, shutdown) cleans up by dropping.
struct KillGroup {
    pgid: Option<i32>,
}

impl KillGroup {
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            // SAFETY: kill(2) with a negative pid signals that process group;
            // the group is the one we created for this script (process_group(0))
            // and its leader has not been reaped yet, so the id is ours.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for KillGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The request body as the script will read it.
pub(crate) enum Input {
    None,
    /// Content-Length body, streamed from the client as the script reads.
    Stream(u64),
    /// A chunked body, read whole first.
    Memory(Vec<u8>),
    File(std::fs::File, u64),
}

impl Input {
    /// Makes the input readable again from its start, for a request sent
    /// anew; false for a body already (partly) taken from the client.
    /// Whether the body could be sent again (all of it is in hand).
    pub(crate) fn replayable(&self) -> bool {
        !matches!(self, Input::Stream(n) if *n > 0)
    }

    pub(crate) fn rewind(&mut self) -> bool {
        match self {
            Input::None | Input::Memory(_) | Input::Stream(0) => true,
            Input::Stream(_) => false,
            Input::File(f, _) => std::io::Seek::rewind(f).is_ok(),
        }
    }

    /// CONTENT_LENGTH for the application.
    pub(crate) fn content_length(&self) -> Option<u64> {
        match self {
            Input::None => None,
            Input::Stream(n) => Some(*n),
            Input::Memory(v) => Some(v.len() as u64),
            Input::File(_, n) => Some(*n),
        }
    }
}

/// Where an application is, as its meta-variables name it.
pub(crate) struct Names<'a> {
    pub script_name: &'a str,
    pub path_info: &'a str,
    pub document_root: &'a str,
    pub script_filename: &'a str,
}

/// The CGI meta-variables of a request (RFC 3875 §4.1), for CGI scripts
/// and FastCGI applications alike.
pub(crate) fn meta_env(
    head: &RequestHead,
    io: &Io,
    names: Names<'_>,
    content_length: Option<u64>,
    pass_authorization: bool,
) -> stoa_cgi::Env {
    let local = io.local_addr();
    let host = conn::host_name(head.host());
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
        protocol: head.version.as_str(),
        server_software: concat!("stoa/", env!("CARGO_PKG_VERSION")),
        server_name: &server_name,
        server_port: local.map_or(0, |a| a.port()),
        remote_addr: Some(io.peer.ip()),
        remote_port: io.peer.port(),
        document_root: names.document_root,
        script_filename: names.script_filename,
        https: false,
        content_length,
        auth_type: None,
        remote_user: None,
        pass_authorization,
    };
    stoa_cgi::meta_variables(&req, head.headers())
}

/// Adds an Authorizer's variables (FastCGI §6.3) to a handler's
/// environment, replacing any of the same name.
pub(crate) fn add_variables(env: &mut stoa_cgi::Env, extra: &[(String, Vec<u8>)]) {
    for (k, v) in extra {
        env.set(k, v);
    }
}

/// Answers a request with a status page; the request body is skipped.
pub(crate) async fn simple(
    head: &RequestHead,
    io: &mut Io,
    ctx: &Ctx<'_>,
    status: u16,
    extra: &[(&str, &[u8])],
) -> bool {
    let mut reply = ctx.reply(&mut io.out, head);
    reply.error(status, extra);
    let keep = conn::finish(head, ctx.worker, io.peer, reply);
    keep && conn::consume_body_pub(head, io, ctx.rt).await
}

/// Runs a CGI script for `head`, whose decoded, normalized path is `norm`.
/// Returns whether the connection may carry another request.
pub async fn serve(
    head: &RequestHead,
    cfg: &CgiConfig,
    norm: String,
    io: &mut Io,
    ctx: &Ctx<'_>,
    depth: u8,
    extra: &[(String, Vec<u8>)],
) -> bool {
    let script = match resolve(cfg, &norm) {
        Ok(s) => s,
        Err(status) => return simple(head, io, ctx, status, &[]).await,
    };

    let input = match read_input(head, io, ctx, cfg.buffering).await {
        Ok(i) => i,
        Err(keep) => return keep,
    };
    let Some(_permit) = cfg.limiter.acquire().await else {
        tracing::warn!(
            "cgi: too many processes and queue full or timed out; 503 for {}",
            script.script_name
        );
        return simple(head, io, ctx, 503, &[("Retry-After", b"1")]).await;
    };

    let filename = script.filename.display().to_string();
    let mut env = meta_env(
        head,
        io,
        Names {
            script_name: &script.script_name,
            path_info: &script.path_info,
            document_root: &cfg.document_root,
            script_filename: &filename,
        },
        input.content_length(),
        cfg.pass_authorization,
    );
    for (k, v) in &cfg.route_env {
        env.set(k, v.as_bytes());
    }
    add_variables(&mut env, extra);

    let mut cmd = Command::new(&script.program);
    if script.program != script.filename {
        cmd.arg(&script.filename);
    }
    cmd.env_clear();
    for (k, v) in cfg.env.iter() {
        cmd.env(k, v);
    }
    for (k, v) in env.iter() {
        cmd.env(k, std::ffi::OsStr::from_bytes(v));
    }
    if let Some(dir) = script.filename.parent() {
        // RFC 3875 §7.2: the script runs in its own directory.
        cmd.current_dir(dir);
    }
    // Its own process group, so that it and anything it starts can be
    // killed together. std uses posix_spawn (vfork semantics) for this.
    cmd.process_group(0);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let streaming = matches!(input, Input::Stream(_));
    let pending = match input {
        Input::None => {
            cmd.stdin(Stdio::null());
            Vec::new()
        }
        Input::File(f, _) => {
            cmd.stdin(Stdio::from(f));
            Vec::new()
        }
        Input::Memory(v) => {
            cmd.stdin(Stdio::piped());
            v
        }
        Input::Stream(_) => {
            cmd.stdin(Stdio::piped());
            Vec::new()
        }
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("cgi: cannot run {}: {e}", script.program.display());
            let status = if e.kind() == io::ErrorKind::PermissionDenied {
                403
            } else {
                500
            };
            return simple_now(head, io, ctx, status);
        }
    };
    let mut group = KillGroup {
        pgid: child.id().and_then(|p| i32::try_from(p).ok()),
    };
    if let Some(stderr) = child.stderr.take() {
        tokio::task::spawn_local(log_stderr(stderr, script.script_name.clone()));
    }
    // Only a streamed body is still to be read from the client.
    let body_reader = streaming.then(|| BodyReader::new(head, ctx.rt));
    let pump = Pump {
        stdin: child.stdin.take(),
        pending,
        pending_pos: 0,
        incoming: Vec::new(),
        reader: body_reader,
        obuf: Vec::with_capacity(OUT_CHUNK),
        stdout_eof: false,
    };
    let outcome = run(head, io, ctx, cfg, &script, &mut child, pump).await;
    match outcome {
        Outcome::Done { keep } => {
            // Reap the script; one that lingers after closing its output is
            // given the timeout, then killed with its group.
            match tokio::time::timeout(cfg.timeout, child.wait()).await {
                Ok(_) => group.pgid = None,
                Err(_) => {
                    group.kill();
                    let _ = child.wait().await;
                }
            }
            keep
        }
        Outcome::Abort => {
            group.kill();
            let _ = child.wait().await;
            false
        }
        Outcome::Redirect {
            location,
            body_done,
        } => {
            group.kill();
            let _ = child.wait().await;
            if depth >= MAX_REDIRECTS {
                tracing::error!("cgi: local redirect loop at {}", script.script_name);
                return simple_now(head, io, ctx, 500);
            }
            redirect(head, &location, io, ctx, depth, body_done).await
        }
    }
}

/// Re-dispatches a local redirect inside the server as a GET for the new
/// path (RFC 3875 §6.2.2).
pub(crate) async fn redirect(
    orig: &RequestHead,
    location: &[u8],
    io: &mut Io,
    ctx: &Ctx<'_>,
    depth: u8,
    body_done: bool,
) -> bool {
    let mut wire = b"GET ".to_vec();
    wire.extend_from_slice(location);
    wire.extend_from_slice(if orig.version == Version::Http10 {
        b" HTTP/1.0\r\n"
    } else {
        b" HTTP/1.1\r\n"
    });
    for (name, value) in orig.headers() {
        if [
            "content-length",
            "transfer-encoding",
            "content-type",
            "expect",
        ]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h.as_bytes()))
        {
            continue;
        }
        wire.extend_from_slice(name);
        wire.extend_from_slice(b": ");
        wire.extend_from_slice(value);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"\r\n");
    let mut new = RequestHead::default();
    let limits = RequestLimits {
        max_head_bytes: wire.len() + 1,
        max_uri_bytes: ctx.rt.limits.max_uri_bytes,
    };
    if !matches!(new.parse(&wire, &limits), Ok(Some(_))) {
        return simple_now(orig, io, ctx, 502);
    }
    new.keep_alive = orig.keep_alive && body_done;
    let (p, rewritten) = conn::pick(&new, ctx.rt);
    let new = rewritten.unwrap_or(new);
    let keep = conn::dispatch(p, &new, io, ctx, depth + 1, &[]).await;
    keep && body_done
}

/// The request body as an application gets it, read before a process is
/// taken: a slow client then holds only its connection, never a CGI slot
/// or a FastCGI process (nginx's `proxy_request_buffering`). Without
/// `buffering` a Content-Length body streams as the application reads; a
/// chunked one is always read first (CGI and FastCGI need CONTENT_LENGTH).
/// `Err` when the request was answered (413, 400) or the client left:
/// whether the connection stays.
pub(crate) async fn read_input(
    head: &RequestHead,
    io: &mut Io,
    ctx: &Ctx<'_>,
    buffering: bool,
) -> Result<Input, bool> {
    match head.framing {
        Framing::None | Framing::Length(0) => return Ok(Input::None),
        Framing::Length(n) if !buffering => return Ok(Input::Stream(n)),
        _ => {}
    }
    buffer_body(head, io, ctx).await.map_err(|e| match e {
        BodyFail::TooLarge => simple_now(head, io, ctx, 413),
        BodyFail::Malformed => simple_now(head, io, ctx, 400),
        BodyFail::Slow => simple_now(head, io, ctx, 408),
        BodyFail::Spool => simple_now(head, io, ctx, 500),
        BodyFail::Gone => false,
    })
}

pub(crate) async fn buffer_body(
    head: &RequestHead,
    io: &mut Io,
    ctx: &Ctx<'_>,
) -> Result<Input, BodyFail> {
    let mut reader = BodyReader::new(head, ctx.rt);
    let mut mem = Vec::new();
    let mut file: Option<(std::fs::File, u64)> = None;
    loop {
        let more = reader.next(io, &mut mem).await?;
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

/// How long a script's stdout may stay quiet after the script exited
/// before its output is taken as complete.
const EXIT_GRACE: Duration = Duration::from_millis(200);

/// An unnamed temporary file (O_TMPFILE): nothing to clean up, ever.
fn temp_file() -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .open(std::env::temp_dir())
}

async fn log_stderr(stderr: tokio::process::ChildStderr, script: String) {
    let mut lines = tokio::io::BufReader::new(stderr.take(1 << 20)).split(b'\n');
    while let Ok(Some(line)) = lines.next_segment().await {
        let shown = &line[..line.len().min(2048)];
        tracing::warn!(
            "cgi {script}: {}",
            String::from_utf8_lossy(shown).trim_end()
        );
    }
}

enum Outcome {
    Done { keep: bool },
    Abort,
    Redirect { location: Vec<u8>, body_done: bool },
}

/// The moving parts between client, script stdin and script stdout.
struct Pump {
    stdin: Option<tokio::process::ChildStdin>,
    /// Request body bytes waiting to go into stdin, from `pending_pos`.
    pending: Vec<u8>,
    pending_pos: usize,
    /// Body bytes just read from the client, moved to `pending` when empty.
    incoming: Vec<u8>,
    reader: Option<BodyReader>,
    obuf: Vec<u8>,
    stdout_eof: bool,
}

impl Pump {
    fn body_done(&self) -> bool {
        self.reader.as_ref().is_none_or(BodyReader::is_done)
    }
}

/// Pumps until the script's output is done. Writes the response.
async fn run(
    head: &RequestHead,
    io: &mut Io,
    ctx: &Ctx<'_>,
    cfg: &CgiConfig,
    script: &Script,
    child: &mut Child,
    mut p: Pump,
) -> Outcome {
    let Some(mut stdout) = child.stdout.take() else {
        return Outcome::Abort;
    };
    let mut deadline = Instant::now() + cfg.timeout;
    // Once the script has exited, its output ends when stdout is closed or
    // stays quiet for [`EXIT_GRACE`]: a background process it started may
    // hold stdout open for ever, and a response without a length would
    // otherwise end only at the timeout, cut.
    let mut exited = false;
    let mut quiet_until = Instant::now();
    // The response, once the script's head is known.
    let mut down: Option<Downstream> = None;
    if p.pending.is_empty() && p.reader.is_none() {
        p.stdin = None;
    }
    loop {
        let feed_ready = p.stdin.is_some() && p.pending_pos < p.pending.len();
        let want_body = p.stdin.is_some()
            && p.incoming.is_empty()
            && p.reader.as_ref().is_some_and(|r| !r.is_done());
        let watch_client = !want_body && p.body_done() && io.rbuf.len() < 64 * 1024;
        let room = p.obuf.len() < OUT_CHUNK && !p.stdout_eof;
        if !room && p.obuf.is_empty() && p.stdout_eof {
            break;
        }
        tokio::select! {
            biased;
            r = stdout.read_buf(&mut p.obuf), if room => match r {
                Ok(0) => p.stdout_eof = true,
                Ok(_) => {
                    deadline = Instant::now() + cfg.timeout;
                    quiet_until = Instant::now() + EXIT_GRACE;
                }
                Err(_) => p.stdout_eof = true,
            },
            _ = child.wait(), if !exited => {
                exited = true;
                quiet_until = Instant::now() + EXIT_GRACE;
            },
            _ = sleep_until(quiet_until), if exited && room => p.stdout_eof = true,
            r = async { match p.stdin.as_mut() { Some(s) => s.write(&p.pending[p.pending_pos..]).await, None => Ok(0) } }, if feed_ready => match r {
                Ok(n) if n > 0 => {
                    p.pending_pos += n;
                    if p.pending_pos == p.pending.len() {
                        p.pending.clear();
                        p.pending_pos = 0;
                        std::mem::swap(&mut p.pending, &mut p.incoming);
                        if p.pending.is_empty() && p.body_done() {
                            p.stdin = None; // EOF for the script
                        }
                    }
                }
                // The script closed its stdin: it wants no more body.
                _ => p.stdin = None,
            },
            ev = client_side(&mut p.reader, io, &mut p.incoming, want_body), if want_body || watch_client => match ev {
                ClientEv::Body(Ok(_)) => {
                    if p.pending.is_empty() {
                        std::mem::swap(&mut p.pending, &mut p.incoming);
                        p.pending_pos = 0;
                    }
                    if p.pending.is_empty() && p.body_done() {
                        p.stdin = None;
                    }
                }
                ClientEv::Body(Err(_)) | ClientEv::Gone => {
                    // Nobody will read the output (or the body broke off):
                    // stop the script now.
                    return Outcome::Abort;
                }
                ClientEv::Nothing => {}
            },
            _ = sleep_until(deadline) => {
                if down.is_none() {
                    tracing::error!("cgi {}: no response head within {:?}", script.script_name, cfg.timeout);
                    let keep = simple_now(head, io, ctx, 504);
                    let _ = keep;
                    io.flush(ctx.rt).await;
                } else {
                    tracing::error!("cgi {}: no output for {:?}", script.script_name, cfg.timeout);
                }
                return Outcome::Abort;
            }
        }

        if down.is_none() {
            if script.nph {
                // NPH: the script speaks HTTP itself; pass it untouched and
                // close afterwards (its framing is its own business).
                down = Some(Downstream::raw(nph_status(&p.obuf)));
            } else {
                match stoa_cgi::parse_head(&p.obuf, MAX_HEAD) {
                    Ok(None) if !p.stdout_eof => continue,
                    Ok(None) | Err(_) => {
                        let why = match stoa_cgi::parse_head(&p.obuf, MAX_HEAD) {
                            Err(HeadError::Malformed(m)) => m,
                            Err(HeadError::TooLarge) => "head too large".to_owned(),
                            _ => "output ended before a complete head".to_owned(),
                        };
                        tracing::error!("cgi {}: bad response head: {why}", script.script_name);
                        simple_now(head, io, ctx, 502);
                        io.flush(ctx.rt).await;
                        return Outcome::Abort;
                    }
                    Ok(Some((h, n))) => {
                        if let Kind::LocalRedirect(loc) = h.kind() {
                            return Outcome::Redirect {
                                location: loc.to_vec(),
                                body_done: p.body_done(),
                            };
                        }
                        p.obuf.drain(..n);
                        let d = Downstream::start(&h, head, io, ctx, p.body_done(), None);
                        if !io.flush(ctx.rt).await {
                            return Outcome::Abort;
                        }
                        if d.bodyless {
                            // HEAD or 204/304: nothing more is sent.
                            let keep = d.finish(head, io, ctx, p.body_done());
                            return if p.body_done() {
                                Outcome::Done { keep }
                            } else {
                                Outcome::Abort
                            };
                        }
                        down = Some(d);
                    }
                }
            }
        }

        // Forward what the script wrote (backpressure: the next read waits
        // for this write).
        let Some(d) = down.as_mut() else { continue };
        if !p.obuf.is_empty() {
            if !d.send(&p.obuf, io, ctx).await {
                return Outcome::Abort;
            }
            p.obuf.clear();
        }
        if p.stdout_eof || d.is_complete() {
            break;
        }
    }
    let Some(d) = down else { return Outcome::Abort };
    if d.truncated() {
        // The script promised more than it wrote: the client must see the
        // truncation as a closed connection.
        tracing::error!(
            "cgi {}: output shorter than its Content-Length",
            script.script_name
        );
    }
    let body_done = p.body_done();
    Outcome::Done {
        keep: d.finish(head, io, ctx, body_done),
    }
}

pub(crate) enum ClientEv {
    Body(Result<bool, BodyFail>),
    Gone,
    Nothing,
}

/// The client's side of the pump: the next piece of the request body when
/// the script wants it, else a watch for the client going away (pipelined
/// bytes that arrive meanwhile are kept for the next request).
pub(crate) async fn client_side(
    reader: &mut Option<BodyReader>,
    io: &mut Io,
    dst: &mut Vec<u8>,
    want_body: bool,
) -> ClientEv {
    if want_body {
        return match reader {
            Some(r) => ClientEv::Body(r.next(io, dst).await),
            None => ClientEv::Body(Ok(false)),
        };
    }
    match io
        .stream
        .readable()
        .await
        .and_then(|_| io.stream.try_read_buf(&mut io.rbuf))
    {
        Ok(0) => ClientEv::Gone,
        Ok(_) => ClientEv::Nothing,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => ClientEv::Nothing,
        Err(_) => ClientEv::Gone,
    }
}

/// Queues an error page and marks the connection for closing (the caller
/// flushes): for failures after the request body was partly read.
pub(crate) fn simple_now(head: &RequestHead, io: &mut Io, ctx: &Ctx<'_>, status: u16) -> bool {
    let mut reply = ctx.reply(&mut io.out, head);
    reply.keep_alive = false;
    reply.error(status, &[]);
    conn::finish(head, ctx.worker, io.peer, reply)
}

/// The status code of an NPH script's status line, for the log.
fn nph_status(out: &[u8]) -> u16 {
    let line = out.split(|&b| b == b'\n').next().unwrap_or(b"");
    line.split(|&b| b == b' ')
        .nth(1)
        .and_then(|c| std::str::from_utf8(c).ok())
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(0)
}
