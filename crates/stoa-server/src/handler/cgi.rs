//! The CGI/1.1 handler (RFC 3875): resolve the script, spawn it in its own
//! process group, pump the request body into its stdin and its stdout to
//! the client with backpressure, and clean up whatever happens.
//!
//! Meta-variables and the script's response head come from `stoa-cgi`, the
//! sans-IO crate FastCGI shares.

use super::Outcome;
use crate::exchange::Exchange;
use crate::gateway::{self, response, ClientEv, Input, Names};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use stoa_cgi::{HeadError, Kind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::sync::Semaphore;
use tokio::time::{sleep_until, Instant};

/// Largest script head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Output read from a script at a time; with the pipe's own buffer this
/// bounds what a slow client makes Stoa hold per request.
const OUT_CHUNK: usize = 32 * 1024;

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
    pub timeout: Option<Duration>,
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
        timeout: timeout.unwrap_or(Duration::from_secs(30)),
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

/// Runs a CGI script for the request, whose decoded, normalized path is
/// `norm`. `extra` are variables an Authorizer granted.
pub async fn serve(
    cfg: &CgiConfig,
    norm: String,
    ex: &mut Exchange<'_>,
    extra: &[(String, Vec<u8>)],
) -> Outcome {
    let script = match resolve(cfg, &norm) {
        Ok(s) => s,
        Err(status) => {
            gateway::simple(ex, status, &[]);
            return Outcome::Done;
        }
    };

    let Some(input) = gateway::read_input(ex, cfg.buffering).await else {
        return Outcome::Done;
    };
    let Some(_permit) = cfg.limiter.acquire().await else {
        tracing::warn!(
            "cgi: too many processes and queue full or timed out; 503 for {}; {}",
            script.script_name,
            ex.who()
        );
        gateway::simple(ex, 503, &[("Retry-After", b"1")]);
        return Outcome::Done;
    };

    let filename = script.filename.display().to_string();
    let mut env = gateway::meta_env(
        ex,
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
    gateway::add_variables(&mut env, extra);

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
    // The script is the "upstream" of the access log's fields.
    ex.upstream_began(filename.clone());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(
                "cgi: cannot run {}: {e}; {}",
                script.program.display(),
                ex.who()
            );
            let status = if e.kind() == io::ErrorKind::PermissionDenied {
                403
            } else {
                500
            };
            gateway::simple_now(ex, status);
            return Outcome::Done;
        }
    };
    let mut group = KillGroup {
        pgid: child.id().and_then(|p| i32::try_from(p).ok()),
    };
    if let Some(stderr) = child.stderr.take() {
        tokio::task::spawn_local(log_stderr(
            stderr,
            script.script_name.clone(),
            ex.who().to_string(),
        ));
    }
    let pump = Pump {
        stdin: child.stdin.take(),
        pending,
        pending_pos: 0,
        incoming: Vec::new(),
        streaming,
        obuf: Vec::with_capacity(OUT_CHUNK),
        stdout_eof: false,
    };
    match run(ex, cfg, &script, &mut child, pump).await {
        Ran::Done => {
            // Reap the script; one that lingers after closing its output is
            // given the timeout, then killed with its group.
            match tokio::time::timeout(cfg.timeout, child.wait()).await {
                Ok(_) => group.pgid = None,
                Err(_) => {
                    group.kill();
                    let _ = child.wait().await;
                }
            }
            Outcome::Done
        }
        Ran::Abort => {
            ex.close();
            group.kill();
            let _ = child.wait().await;
            Outcome::Done
        }
        Ran::Redirect(location) => {
            group.kill();
            let _ = child.wait().await;
            Outcome::Redirect(location)
        }
    }
}

/// How long a script's stdout may stay quiet after the script exited
/// before its output is taken as complete.
const EXIT_GRACE: Duration = Duration::from_millis(200);

async fn log_stderr(mut stderr: tokio::process::ChildStderr, script: String, who: String) {
    // A script's stderr is drained to its end (a script blocked on a full
    // pipe, or killed by SIGPIPE, would be a worse fate than a long log),
    // but at most STDERR_LOGGED bytes of it are logged: the rest is
    // counted and said in one line, never dropped without a word. A line
    // is kept up to STDERR_LINE bytes (the rest of it is skipped), so a
    // script that never writes a newline costs no memory.
    let mut chunk = vec![0u8; 16 * 1024];
    let mut line: Vec<u8> = Vec::with_capacity(256);
    // Bytes of the current line seen (kept or not).
    let mut line_len = 0usize;
    let mut logged = 0usize;
    let (mut dropped, mut dropped_bytes) = (0u64, 0u64);
    let mut end_line = |line: &mut Vec<u8>, len: usize| {
        if logged >= STDERR_LOGGED {
            dropped += 1;
            dropped_bytes += len as u64 + 1;
        } else {
            logged += len + 1;
            tracing::warn!(
                "cgi {script}: {} ({who})",
                String::from_utf8_lossy(line).trim_end()
            );
        }
        line.clear();
    };
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for piece in chunk[..n].split_inclusive(|&b| b == b'\n') {
            let (text, ends) = match piece.split_last() {
                Some((b'\n', t)) => (t, true),
                _ => (piece, false),
            };
            let room = STDERR_LINE.saturating_sub(line.len());
            line.extend_from_slice(&text[..text.len().min(room)]);
            line_len += text.len();
            if ends {
                end_line(&mut line, line_len);
                line_len = 0;
            }
        }
    }
    if line_len > 0 {
        end_line(&mut line, line_len);
    }
    if dropped > 0 {
        tracing::warn!(
            "cgi {script}: {dropped} more stderr line(s) ({dropped_bytes} bytes) not logged: \
             over {} KiB from one request ({who})",
            STDERR_LOGGED / 1024
        );
    }
}

/// The longest stderr line logged whole; longer ones are cut there.
const STDERR_LINE: usize = 2048;

/// Bytes of one script's stderr that are logged line by line.
const STDERR_LOGGED: usize = 1 << 20;

/// How the pump ended.
enum Ran {
    Done,
    Abort,
    Redirect(Vec<u8>),
}

/// The moving parts between client, script stdin and script stdout.
struct Pump {
    stdin: Option<tokio::process::ChildStdin>,
    /// Request body bytes waiting to go into stdin, from `pending_pos`.
    pending: Vec<u8>,
    pending_pos: usize,
    /// Body bytes just read from the client, moved to `pending` when empty.
    incoming: Vec<u8>,
    /// The body streams from the client as the script reads it.
    streaming: bool,
    obuf: Vec<u8>,
    stdout_eof: bool,
}

/// Pumps until the script's output is done. Writes the response.
async fn run(
    ex: &mut Exchange<'_>,
    cfg: &CgiConfig,
    script: &Script,
    child: &mut Child,
    mut p: Pump,
) -> Ran {
    let Some(mut stdout) = child.stdout.take() else {
        return Ran::Abort;
    };
    let mut deadline = Instant::now() + cfg.timeout;
    // Once the script has exited, its output ends when stdout is closed or
    // stays quiet for [`EXIT_GRACE`]: a background process it started may
    // hold stdout open for ever, and a response without a length would
    // otherwise end only at the timeout, cut.
    let mut exited = false;
    let mut quiet_until = Instant::now();
    // The response head was written (or NPH output started).
    let mut started = false;
    // An NPH script's status, once its output began.
    let mut nph: Option<u16> = None;
    if p.pending.is_empty() && !p.streaming {
        p.stdin = None;
    }
    loop {
        let feed_ready = p.stdin.is_some() && p.pending_pos < p.pending.len();
        let body_done = !p.streaming || ex.body_done();
        let want_body = p.stdin.is_some() && p.incoming.is_empty() && p.streaming && !body_done;
        let watch_client = !want_body && body_done && ex.can_watch();
        // Until the head is parsed, read past the head limit so that a head
        // without its end is refused (502) at once; then a chunk at a time.
        let cap = if started { OUT_CHUNK } else { MAX_HEAD + 1 };
        let room = p.obuf.len() < cap && !p.stdout_eof;
        if !room && p.obuf.is_empty() && p.stdout_eof {
            break;
        }
        tokio::select! {
            biased;
            r = stdout.read_buf(&mut p.obuf), if room => match r {
                Ok(0) => {
                    p.stdout_eof = true;
                    ex.upstream_ended();
                }
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
                        if p.pending.is_empty() && body_done {
                            p.stdin = None; // EOF for the script
                        }
                    }
                }
                // The script closed its stdin: it wants no more body.
                _ => p.stdin = None,
            },
            ev = gateway::client_side(ex, &mut p.incoming, want_body), if want_body || watch_client => match ev {
                ClientEv::Body(Ok(_)) => {
                    if p.pending.is_empty() {
                        std::mem::swap(&mut p.pending, &mut p.incoming);
                        p.pending_pos = 0;
                    }
                    if p.pending.is_empty() && (!p.streaming || ex.body_done()) {
                        p.stdin = None;
                    }
                }
                ClientEv::Body(Err(_)) | ClientEv::Gone => {
                    // Nobody will read the output (or the body broke off):
                    // stop the script now.
                    return Ran::Abort;
                }
                ClientEv::Nothing => {}
            },
            _ = sleep_until(deadline) => {
                if !started {
                    tracing::error!("cgi {}: no response head within {:?}; {}", script.script_name, cfg.timeout, ex.who());
                    gateway::fail_now(ex, 504).await;
                } else {
                    tracing::error!("cgi {}: no output for {:?}; {}", script.script_name, cfg.timeout, ex.who());
                }
                return Ran::Abort;
            }
        }

        if !started {
            if script.nph {
                // NPH: the script speaks HTTP itself; on HTTP/1 its output
                // passes untouched and the connection closes afterwards (its
                // framing is its own business).
                started = true;
                nph = Some(nph_status(&p.obuf));
            } else {
                match stoa_cgi::parse_head(&p.obuf, MAX_HEAD) {
                    Ok(None) if !p.stdout_eof => continue,
                    Ok(None) | Err(_) => {
                        let why = match stoa_cgi::parse_head(&p.obuf, MAX_HEAD) {
                            Err(HeadError::Malformed(m)) => m,
                            Err(HeadError::TooLarge) => "head too large".to_owned(),
                            _ => "output ended before a complete head".to_owned(),
                        };
                        tracing::error!(
                            "cgi {}: bad response head: {why}; {}",
                            script.script_name,
                            ex.who()
                        );
                        gateway::fail_now(ex, 502).await;
                        return Ran::Abort;
                    }
                    Ok(Some((h, n))) => {
                        if let Kind::LocalRedirect(loc) = h.kind() {
                            return Ran::Redirect(loc.to_vec());
                        }
                        p.obuf.drain(..n);
                        let body_done = !p.streaming || ex.body_done();
                        let bodyless = response::start(&h, ex, body_done, None);
                        if !ex.flush().await {
                            return Ran::Abort;
                        }
                        if bodyless {
                            // HEAD or 204/304: nothing more is sent.
                            ex.finish();
                            return if body_done { Ran::Done } else { Ran::Abort };
                        }
                        started = true;
                    }
                }
            }
        }

        // Forward what the script wrote (backpressure: the next read waits
        // for this write).
        if !started {
            continue;
        }
        if !p.obuf.is_empty() {
            match nph {
                Some(status) => ex.raw(&p.obuf, status),
                None => ex.write(&p.obuf),
            }
            if !ex.flush().await {
                return Ran::Abort;
            }
            p.obuf.clear();
        }
        if p.stdout_eof || (nph.is_none() && ex.is_complete()) {
            break;
        }
    }
    if !started {
        return Ran::Abort;
    }
    if ex.truncated() {
        // The script promised more than it wrote: the client must see the
        // truncation as a closed connection.
        tracing::error!(
            "cgi {}: output shorter than its Content-Length; {}",
            script.script_name,
            ex.who()
        );
    }
    ex.finish();
    Ran::Done
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

// ---- configuration: `cgi = {...}` of a route ----

/// `cgi = {...}`: programs run per request (RFC 3875).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgiRouteConfig {
    pub dir: Option<String>,
    pub interpreter: Option<String>,
    /// One program for the whole prefix; the rest of the path is PATH_INFO.
    pub script: Option<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    pub timeout: Option<crate::units::Dur>,
    #[serde(default)]
    pub pass_authorization: bool,
}

impl super::configure::Configure for CgiRouteConfig {
    fn configure(
        &self,
        cx: &super::configure::Ctx<'_>,
    ) -> Result<super::Handler, super::configure::Fail> {
        let cfg = route_config(
            RouteSpec {
                dir: self.dir.as_deref().map(cx.resolve),
                interpreter: self.interpreter.as_deref().map(cx.resolve),
                script: self.script.as_deref().map(cx.resolve),
                timeout: self.timeout.map(|d| d.0),
                pass_authorization: self.pass_authorization,
                buffering: cx.request_buffering,
                env: self
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            },
            cx.prefix,
            cx.site.root.clone(),
            cx.cgi,
        )
        .map_err(super::configure::Fail::at("cgi"))?;
        Ok(super::Handler::Cgi(Arc::new(cfg)))
    }

    fn runs_scripts(&self) -> bool {
        true
    }
}
