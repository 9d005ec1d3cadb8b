//! `stoa-hello-fcgi`: a small FastCGI application written with Stoa's own
//! application library (`stoa_fastcgi::app::blocking`), for the demo and
//! the integration tests.
//!
//! Start it from a web server, which passes the listening socket as fd 0
//! (FastCGI §2.2); Stoa does that for a `[[pool]]` with a `command`.
//!
//! It answers every request with a `text/plain` report, one `key=value`
//! per line: `pid`, `role`, `method`, `query`, `content_length` (the
//! CONTENT_LENGTH param, `-` when absent), `body_len`, `body_fnv` (FNV-1a
//! 64 of the body, 16 hex digits), `request_id`, `keep_conn`, `inflight`
//! (requests running in this process as the answer is written), `peak`
//! (most requests ever running at once), `served` (requests this process
//! answered before this one) and `conns` (transport connections accepted).
//! The `X-Pid` response header carries the PID too.
//!
//! The query string steers it (parameters combine, applied in this order):
//!
//! - `log=TEXT`: writes TEXT on FCGI_STDERR (the web server's error log);
//! - `sleep=MS`: waits MS milliseconds before answering, in small steps,
//!   stopping early when the web server aborts the request (FCGI_ABORT_REQUEST,
//!   §5.4), which it reports on its own stderr;
//! - `exit=CODE`: exits the whole process with CODE mid-request (after the
//!   sleep), with `partial=1` after sending the head and a few bytes;
//! - `status=N`: answers with `Status: N`;
//! - `location=URL`: answers with just `Location: URL` (a redirect);
//! - `big=N`: answers N bytes of `pattern(N, seed)` (`seed=S`, default 1;
//!   the xorshift of the tests' `common::pattern`) with a Content-Length;
//! - `drip=N`: answers N pieces of 1 KiB, one every `every=MS` (default
//!   20), stopping (and saying so on its stderr) when a write fails or the
//!   request is aborted;
//! - `params=1`: adds every FastCGI param as a `param NAME=VALUE` line;
//! - `env=NAME`: adds `env=VALUE`, the process's environment variable NAME
//!   (empty when unset), the environment its pool's `env` gave it;
//! - `linger=MS`: after the whole report is sent, waits MS milliseconds
//!   before ending the request (FCGI_END_REQUEST comes that much later).
//!
//! Modes (flags or environment):
//!
//! - default: a single-threaded application like a libfcgi one: one
//!   connection at a time, one request at a time, and it says so in
//!   FCGI_GET_VALUES (FCGI_MAX_CONNS=1, FCGI_MAX_REQS=1, FCGI_MPXS_CONNS=0);
//! - `--mpx` (or `STOA_FCGI_MPX=1`): multiplexing (FCGI_MPXS_CONNS=1),
//!   50 connections and 50 requests at once: a thread per connection (at
//!   most FCGI_MAX_CONNS, the others wait in the listen backlog), each
//!   served by the library's `blocking::serve_connection`, so requests run
//!   on threads of their own; the accept loop is this program's, so that
//!   it counts `conns`. A request past FCGI_MAX_REQS in the whole process
//!   is answered `Status: 503` (the library answers OVERLOADED only past
//!   the limit of its own connection);
//! - `--max-conns N`, `--max-reqs N`: override what the multi-threaded
//!   mode (`--mpx`) offers; `--no-mpx` keeps it from multiplexing;
//! - `--authorizer`: the Authorizer role (§6.3) only: `Status: 200` with
//!   `Variable-USER: alice` for `Authorization: Bearer good`, else 403.

use std::io::{self, Write};
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use stoa_fastcgi::app::blocking::{self, Listener, Output, Stream};
use stoa_fastcgi::app::{Request, Settings};
use stoa_fastcgi::Role;

/// Requests running now, the most ever running at once, requests answered
/// and transport connections accepted (counted by this program's accept
/// loops, in every mode).
static INFLIGHT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static SERVED: AtomicUsize = AtomicUsize::new(0);
static CONNS: AtomicUsize = AtomicUsize::new(0);
/// Requests admitted under FCGI_MAX_REQS (threaded modes), and the limit.
static ADMITTED: AtomicUsize = AtomicUsize::new(0);
static MAX_REQS: AtomicUsize = AtomicUsize::new(1);

const USAGE: &str =
    "usage: stoa-hello-fcgi [--mpx] [--no-mpx] [--max-conns N] [--max-reqs N] [--authorizer]\n\
Started by a web server with a listening socket as fd 0 (FastCGI \u{a7}2.2).\n\
Environment: STOA_FCGI_MPX=1 is --mpx.\n";

struct Opts {
    mpx: bool,
    no_mpx: bool,
    max_conns: Option<u32>,
    max_reqs: Option<u32>,
    authorizer: bool,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        mpx: std::env::var("STOA_FCGI_MPX").is_ok_and(|v| v == "1"),
        no_mpx: false,
        max_conns: None,
        max_reqs: None,
        authorizer: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Result<u32, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{name} needs a positive number"))
        };
        match a.as_str() {
            "--mpx" => o.mpx = true,
            "--no-mpx" => o.no_mpx = true,
            "--max-conns" => o.max_conns = Some(num("--max-conns")?),
            "--max-reqs" => o.max_reqs = Some(num("--max-reqs")?),
            "--authorizer" => o.authorizer = true,
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(o)
}

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprint!("stoa-hello-fcgi: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let threaded = opts.mpx || opts.max_conns.is_some() || opts.max_reqs.is_some();
    let settings = Settings {
        max_conns: if threaded {
            opts.max_conns.unwrap_or(50)
        } else {
            1
        },
        max_reqs: if threaded {
            opts.max_reqs.unwrap_or(50)
        } else {
            1
        },
        multiplex: threaded && !opts.no_mpx,
        roles: vec![if opts.authorizer {
            Role::Authorizer
        } else {
            Role::Responder
        }],
        ..Settings::default()
    }
    .with_env();
    let listener = match Listener::from_fd0() {
        Ok(Some(l)) => l,
        Ok(None) => {
            eprint!("stoa-hello-fcgi: fd 0 is not a listening socket\n{USAGE}");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("stoa-hello-fcgi: {e}");
            std::process::exit(2);
        }
    };
    let handler: fn(&Request, &mut Output) -> u32 =
        if opts.authorizer { authorize } else { respond };
    let r = if threaded {
        serve_threaded(&listener, &settings, handler)
    } else {
        serve_one_at_a_time(&listener, &settings, handler)
    };
    if let Err(e) = r {
        eprintln!("stoa-hello-fcgi[{}]: {e}", std::process::id());
        std::process::exit(1);
    }
}

/// Accepts one connection from the web server (FCGI_WEB_SERVER_ADDRS, §3.2,
/// checked for TCP) and counts it; gives up on a listener that keeps failing.
fn accept(listener: &Listener, settings: &Settings) -> io::Result<Stream> {
    let mut failures = 0;
    loop {
        match listener.accept() {
            Ok(s) if allowed(&s, settings) => {
                CONNS.fetch_add(1, Ordering::Relaxed);
                return Ok(s);
            }
            Ok(_) => failures = 0,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                failures += 1;
                if failures > 100 {
                    return Err(e);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

fn allowed(stream: &Stream, settings: &Settings) -> bool {
    let (Stream::Tcp(s), Some(list)) = (stream, &settings.web_server_addrs) else {
        return true;
    };
    s.peer_addr().is_ok_and(|peer| {
        let ip = match peer.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer.ip(), IpAddr::V4),
            v4 => v4,
        };
        list.contains(&ip)
    })
}

/// A single-threaded application's loop: one connection at a time, served
/// to its end before the next is accepted (what libfcgi's FCGX_Accept does).
fn serve_one_at_a_time(
    listener: &Listener,
    settings: &Settings,
    handler: fn(&Request, &mut Output) -> u32,
) -> io::Result<()> {
    loop {
        let stream = accept(listener, settings)?;
        // A broken connection ends only that connection.
        let _ = blocking::serve_connection(stream, settings.clone(), handler);
    }
}

/// The threaded modes: a thread per connection, at most `max_conns` at once
/// (the next is accepted when one closes), requests on threads of their own.
fn serve_threaded(
    listener: &Listener,
    settings: &Settings,
    handler: fn(&Request, &mut Output) -> u32,
) -> io::Result<()> {
    MAX_REQS.store(settings.max_reqs.max(1) as usize, Ordering::Relaxed);
    let max_conns = settings.max_conns.max(1) as usize;
    let open = Arc::new((Mutex::new(0usize), Condvar::new()));
    loop {
        {
            let mut n = open.0.lock().unwrap_or_else(|e| e.into_inner());
            while *n >= max_conns {
                n = open.1.wait(n).unwrap_or_else(|e| e.into_inner());
            }
            *n += 1;
        }
        let stream = match accept(listener, settings) {
            Ok(s) => s,
            Err(e) => {
                release(&open);
                return Err(e);
            }
        };
        let (open2, settings) = (open.clone(), settings.clone());
        let spawned = std::thread::Builder::new()
            .name("fcgi-conn".into())
            .spawn(move || {
                let _ = blocking::serve_connection(
                    stream,
                    settings,
                    move |req: &Request, out: &mut Output| admitted(req, out, handler),
                );
                release(&open2);
            });
        if spawned.is_err() {
            // The stream went with the closure: that connection is closed.
            release(&open);
        }
    }
}

/// Frees a connection slot of [`serve_threaded`].
fn release(open: &(Mutex<usize>, Condvar)) {
    *open.0.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
    open.1.notify_one();
}

/// Runs `handler` unless FCGI_MAX_REQS requests already run in the process.
fn admitted(req: &Request, out: &mut Output, handler: fn(&Request, &mut Output) -> u32) -> u32 {
    let n = ADMITTED.fetch_add(1, Ordering::AcqRel);
    let status = if n < MAX_REQS.load(Ordering::Relaxed) {
        handler(req, out)
    } else {
        let _ = write!(
            out,
            "Status: 503\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\noverloaded\r\n"
        );
        1
    };
    ADMITTED.fetch_sub(1, Ordering::AcqRel);
    status
}

/// Query parameters, not percent-decoded (the tests need none).
fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then_some(v)
    })
}

fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Marks a request as running for `inflight` / `peak`.
struct Running;

impl Running {
    fn start() -> Running {
        let n = INFLIGHT.fetch_add(1, Ordering::AcqRel) + 1;
        PEAK.fetch_max(n, Ordering::AcqRel);
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        INFLIGHT.fetch_sub(1, Ordering::AcqRel);
        SERVED.fetch_add(1, Ordering::AcqRel);
    }
}

fn pid() -> u32 {
    std::process::id()
}

/// Sleeps `ms` in small steps; false when the request was aborted meanwhile.
fn sleep_unless_aborted(ms: u64, out: &Output, req: &Request) -> bool {
    let t0 = Instant::now();
    let until = t0 + Duration::from_millis(ms);
    while Instant::now() < until {
        if out.is_aborted() {
            eprintln!(
                "stoa-hello-fcgi[{}]: request {} ({}) aborted after {} ms",
                pid(),
                req.id,
                req.param("QUERY_STRING").unwrap_or(""),
                t0.elapsed().as_millis()
            );
            return false;
        }
        std::thread::sleep(Duration::from_millis(5).min(until - Instant::now()));
    }
    true
}

/// The Responder role (§6.2).
fn respond(req: &Request, out: &mut Output) -> u32 {
    let _running = Running::start();
    let served_before = SERVED.load(Ordering::Acquire);
    let query = req.param("QUERY_STRING").unwrap_or("").to_owned();
    let q = |name: &str| query_param(&query, name);
    let num = |name: &str| q(name).and_then(|v| v.parse::<u64>().ok());

    if let Some(text) = q("log") {
        let _ = out.stderr(format!("{text}\n").as_bytes());
    }
    if let Some(ms) = num("sleep") {
        if !sleep_unless_aborted(ms, out, req) {
            return 1;
        }
    }
    if let Some(code) = num("exit") {
        if q("partial") == Some("1") {
            let _ = write!(
                out,
                "Content-Type: text/plain\r\nX-Pid: {}\r\n\r\npartial output, then exit",
                pid()
            );
            let _ = out.flush();
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!(
            "stoa-hello-fcgi[{}]: exiting with {code} mid-request as asked",
            pid()
        );
        std::process::exit(code as i32);
    }
    let status = num("status");
    let status_line = status.map_or(String::new(), |s| format!("Status: {s}\r\n"));
    if let Some(url) = q("location") {
        let _ = write!(out, "{status_line}Location: {url}\r\n\r\n");
        return 0;
    }
    if let Some(n) = num("big") {
        return send_big(n, num("seed").unwrap_or(1), &status_line, out);
    }
    if let Some(n) = num("drip") {
        return drip(n, num("every").unwrap_or(20), req, out);
    }

    let content_length = req.param("CONTENT_LENGTH").unwrap_or("-");
    let mut body = format!(
        "pid={}\nrole={:?}\nmethod={}\nquery={}\ncontent_length={}\nbody_len={}\n\
         body_fnv={:016x}\nrequest_id={}\nkeep_conn={}\ninflight={}\npeak={}\nserved={}\nconns={}\n",
        pid(),
        req.role,
        req.param("REQUEST_METHOD").unwrap_or(""),
        query,
        content_length,
        req.stdin.len(),
        fnv1a(&req.stdin),
        req.id,
        u8::from(req.keep_conn),
        INFLIGHT.load(Ordering::Acquire),
        PEAK.load(Ordering::Acquire),
        served_before,
        CONNS.load(Ordering::Acquire),
    );
    if let Some(name) = q("env") {
        body.push_str(&format!(
            "env={}\n",
            std::env::var(name).unwrap_or_default()
        ));
    }
    if q("params") == Some("1") {
        for (n, v) in &req.params {
            body.push_str(&format!(
                "param {}={}\n",
                String::from_utf8_lossy(n),
                String::from_utf8_lossy(v)
            ));
        }
    }
    // `setcookie=V`: a new session, `Set-Cookie: SID=V` (affinity tests).
    let cookie = q("setcookie").map_or(String::new(), |v| {
        format!("Set-Cookie: SID={v}; Path=/\r\n")
    });
    let _ = write!(
        out,
        "{status_line}{cookie}Content-Type: text/plain\r\nX-Pid: {}\r\nContent-Length: {}\r\n\r\n{body}",
        pid(),
        body.len()
    );
    if let Some(ms) = num("linger") {
        let _ = out.flush();
        sleep_unless_aborted(ms, out, req);
    }
    0
}

/// `big=N`: N bytes of the tests' xorshift pattern, streamed.
fn send_big(n: u64, seed: u64, status_line: &str, out: &mut Output) -> u32 {
    if write!(
        out,
        "{status_line}Content-Type: application/octet-stream\r\nX-Pid: {}\r\nContent-Length: {n}\r\n\r\n",
        pid()
    )
    .is_err()
    {
        return 1;
    }
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut buf = vec![0u8; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let k = (left as usize).min(buf.len());
        for b in &mut buf[..k] {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = (x >> 24) as u8;
        }
        if let Err(e) = out.write_all(&buf[..k]) {
            eprintln!(
                "stoa-hello-fcgi[{}]: write failed after {} of {n} bytes: {e}",
                pid(),
                n - left
            );
            return 1;
        }
        left -= k as u64;
        if out.is_aborted() {
            eprintln!("stoa-hello-fcgi[{}]: big response aborted", pid());
            return 1;
        }
    }
    0
}

/// `drip=N`: N pieces of 1 KiB, one every `every` ms, each flushed.
fn drip(n: u64, every: u64, req: &Request, out: &mut Output) -> u32 {
    let _ = write!(
        out,
        "Content-Type: text/plain\r\nX-Pid: {}\r\nContent-Length: {}\r\n\r\n",
        pid(),
        n * 1024
    );
    let piece = [b'd'; 1024];
    for i in 0..n {
        let r = out.write_all(&piece).and_then(|_| out.flush());
        if let Err(e) = r {
            eprintln!(
                "stoa-hello-fcgi[{}]: drip stopped after {i} of {n} pieces: {e}",
                pid()
            );
            return 1;
        }
        if !sleep_unless_aborted(every, out, req) {
            return 1;
        }
    }
    0
}

/// The Authorizer role (§6.3).
fn authorize(req: &Request, out: &mut Output) -> u32 {
    let _running = Running::start();
    let ok = req.param("HTTP_AUTHORIZATION") == Some("Bearer good");
    let _ = if ok {
        write!(out, "Status: 200\r\nVariable-USER: alice\r\n\r\n")
    } else {
        write!(
            out,
            "Status: 403\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nforbidden\n"
        )
    };
    0
}
