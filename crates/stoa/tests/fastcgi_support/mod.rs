//! Helpers for the FastCGI tests: the applications of `tests/fastcgi-apps`
//! (the C one compiled here against libfcgi), Stoa's own `stoa-hello-fcgi`,
//! a site with pools, the pools' state from the status page, php-fpm started with a
//! generated configuration, applications started by hand on a socket, a
//! small FastCGI client (the `stoa_fastcgi` gateway side) to talk to an
//! application directly, `/proc` probes and checksums.
//!
//! A required program that is missing fails the test with a message naming
//! the Debian package: nothing is skipped.

#![allow(dead_code)]

use crate::common::{php_fpm_binary, stop_master, Conn, Response, Server, TempDir};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::ops::{Deref, DerefMut};
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use stoa_fastcgi::gateway::{Connection, Event};
use stoa_fastcgi::{ProtocolStatus, Role, Values};

/// Stoa's own FastCGI demo application.
pub const HELLO: &str = env!("CARGO_BIN_EXE_stoa-hello-fcgi");
pub use crate::common::PHP_CGI;
pub const PERL: &str = "/usr/bin/perl";

/// The applications, pages and php-fpm template the tests run.
pub fn apps_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fastcgi-apps")
}

// ---------------------------------------------------------------------------
// Required programs

pub use crate::common::require;

pub fn require_perl_fcgi() {
    require(PERL, "perl");
    let ok = Command::new(PERL)
        .args(["-MFCGI", "-e", "1"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "Perl's FCGI module is missing: this FastCGI test needs the Debian package \
         `libfcgi-perl` (apt-get install libfcgi-perl); test.sh installs it when run as root"
    );
}

pub fn require_php_cgi() {
    require(PHP_CGI, "php-cgi");
}

/// `tests/fastcgi-apps/hello_fcgi.c` compiled against libfcgi, once per
/// test run (into Cargo's temporary directory for integration tests).
pub fn c_app() -> PathBuf {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            if !Path::new("/usr/include/fcgiapp.h").exists() {
                return Err(
                    "/usr/include/fcgiapp.h is missing: this FastCGI test needs the \
                            Debian package `libfcgi-dev` (apt-get install libfcgi-dev); \
                            test.sh installs it when run as root"
                        .into(),
                );
            }
            let cc_found = std::env::var_os("PATH")
                .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("cc").is_file()));
            if !cc_found {
                return Err(
                    "`cc` is missing: this FastCGI test needs the Debian package \
                            `gcc` (apt-get install gcc)"
                        .into(),
                );
            }
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fastcgi-apps");
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let out = dir.join("hello_fcgi");
            let tmp = dir.join(format!("hello_fcgi.{}", std::process::id()));
            let src = apps_dir().join("hello_fcgi.c");
            let r = Command::new("cc")
                .arg("-O2")
                .arg("-o")
                .arg(&tmp)
                .arg(&src)
                .arg("-lfcgi")
                .output()
                .map_err(|e| format!("run cc: {e}"))?;
            if !r.status.success() {
                return Err(format!(
                    "cc {} -lfcgi failed (needs the Debian package `libfcgi-dev`): {}",
                    src.display(),
                    String::from_utf8_lossy(&r.stderr)
                ));
            }
            std::fs::rename(&tmp, &out).map_err(|e| e.to_string())?;
            Ok(out)
        })
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

// ---------------------------------------------------------------------------
// Sites

/// The top of the tests' configs: two workers (so that requests of one
/// test really meet across event loops) on an ephemeral port.
pub fn prelude(workers: usize) -> String {
    format!("listen = [\"127.0.0.1:0\"]\nworkers = {workers}\nuser = \"root\"\n\n[log]\naccess = \"off\"\n\n")
}

/// A `[[pool]]` of `stoa-hello-fcgi` with extra keys (one per line).
pub fn hello_pool(name: &str, extra: &str) -> String {
    hello_pool_args(name, &[], extra)
}

/// A `[[pool]]` of `stoa-hello-fcgi ARGS...` with extra keys.
pub fn hello_pool_args(name: &str, args: &[&str], extra: &str) -> String {
    let mut cmd = format!("\"{HELLO}\"");
    for a in args {
        cmd.push_str(&format!(", \"{a}\""));
    }
    format!("[[pool]]\nname = \"{name}\"\ncommand = [{cmd}]\n{extra}\n\n")
}

/// A `[[site.route]]` from `prefix` to pool `pool`.
pub fn route(prefix: &str, pool: &str) -> String {
    format!("[[site.route]]\nprefix = \"{prefix}\"\nfastcgi = {{ pool = \"{pool}\" }}\n\n")
}

/// A temporary directory with `www/` (the site root, holding the PHP pages
/// and `static.txt`), a config and the server running it.
pub struct Site {
    // Declared first: the server (and its pools) stop before the directory
    // goes.
    pub server: Server,
    pub dir: TempDir,
}

impl Deref for Site {
    type Target = Server;
    fn deref(&self) -> &Server {
        &self.server
    }
}

/// Stops the server with SIGTERM (it then stops its pools and removes its
/// socket directory), falling back on the SIGKILL of `Server`'s drop.
impl Drop for Site {
    fn drop(&mut self) {
        if self.server.wait_exit(Duration::ZERO).is_none() {
            // SAFETY: kill(2) on the server we spawned and have not reaped.
            unsafe {
                libc::kill(self.server.pid(), libc::SIGTERM);
            }
            let _ = self.server.wait_exit(Duration::from_secs(3));
        }
    }
}

impl DerefMut for Site {
    fn deref_mut(&mut self) -> &mut Server {
        &mut self.server
    }
}

/// Copies the PHP pages and static files into `dir/www`.
pub fn populate_www(dir: &TempDir) {
    let src = apps_dir().join("www");
    for e in std::fs::read_dir(&src).expect("read tests/fastcgi-apps/www") {
        let e = e.expect("dir entry");
        std::fs::copy(e.path(), dir.join("www").join(e.file_name())).expect("copy page");
    }
}

impl Site {
    /// `pools` holds `[[pool]]` tables; `routes` the `[[site.route]]`s of
    /// the one site (root `www`).
    pub fn start(tag: &str, pools: &str, routes: &str) -> Site {
        let dir = TempDir::new(tag);
        dir.mkdir("www");
        populate_www(&dir);
        Site::start_in(dir, pools, routes)
    }

    pub fn start_in(dir: TempDir, pools: &str, routes: &str) -> Site {
        let cfg = dir.write("stoa.toml", site_config(pools, routes));
        let server = Server::with_config(&cfg);
        Site { server, dir }
    }

    /// Rewrites the config (for a reload).
    pub fn rewrite(&self, pools: &str, routes: &str) {
        self.dir.write("stoa.toml", site_config(pools, routes));
    }

    /// The processes of pool `name`, from the status page.
    pub fn status(&self, name: &str) -> PoolStatus {
        pool_status(&self.server, name)
    }

    /// Waits until `cond` holds for pool `name`'s status.
    pub fn wait_status(
        &self,
        name: &str,
        within: Duration,
        mut cond: impl FnMut(&PoolStatus) -> bool,
    ) -> PoolStatus {
        let until = Instant::now() + within;
        loop {
            let st = self.status(name);
            if cond(&st) {
                return st;
            }
            assert!(
                Instant::now() < until,
                "pool {name} never reached the expected state; last status: {st:?}\nstderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until every process of pool `name` runs (has a pid).
    pub fn wait_running(&self, name: &str, n: usize) -> PoolStatus {
        self.wait_status(name, Duration::from_secs(10), |s| {
            s.procs
                .iter()
                .filter(|p| p.state == "Running" && p.pid > 0)
                .count()
                >= n
        })
    }
}

pub fn site_config(pools: &str, routes: &str) -> String {
    format!(
        "{}{pools}\n[[site]]\nroot = \"www\"\n\n{routes}{STATUS_ROUTE}",
        prelude(2)
    )
}

/// Where the tests' sites serve the status page (loopback only).
pub const STATUS_PATH: &str = "/stoa-test-status";
pub const STATUS_ROUTE: &str = "\n[[site.route]]\nprefix = \"/stoa-test-status\"\nstatus = {}\n";

// ---------------------------------------------------------------------------
// The pools' state, from the status page

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStatus {
    pub index: usize,
    pub state: String,
    pub pid: i32,
    pub busy: usize,
    pub capacity: usize,
    pub served: u64,
    pub restarts: u32,
}

#[derive(Debug, Clone)]
pub struct PoolStatus {
    /// The pool's part of the status page, as JSON text.
    pub line: String,
    pub waiting: usize,
    pub procs: Vec<ProcStatus>,
}

impl PoolStatus {
    pub fn proc(&self, index: usize) -> &ProcStatus {
        self.procs
            .iter()
            .find(|p| p.index == index)
            .unwrap_or_else(|| panic!("no process #{index} in {:?}", self.line))
    }

    /// PIDs of processes that run.
    pub fn pids(&self) -> Vec<i32> {
        self.procs
            .iter()
            .filter(|p| p.pid > 0)
            .map(|p| p.pid)
            .collect()
    }
}

/// Pool `name` of the status page's JSON (`?format=json`). States are
/// written as the tests name them (`Running`); a spawned pool's stopped
/// slots are left out, as idle capacity rather than processes.
pub fn parse_status(json: &str, name: &str) -> Option<PoolStatus> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let pool = v["pools"].as_array()?.iter().find(|p| p["name"] == name)?;
    let spawned = pool["kind"] == "spawned";
    let mut procs = Vec::new();
    for c in pool["processes"].as_array()? {
        let state = c["state"].as_str()?;
        if spawned && state == "stopped" {
            continue;
        }
        let mut cap = state.chars();
        let state = cap
            .next()
            .map(|f| f.to_ascii_uppercase().to_string() + cap.as_str())
            .unwrap_or_default();
        procs.push(ProcStatus {
            index: c["index"].as_u64()? as usize,
            state,
            // An address pool's slot is a server, named by its address,
            // not a process of Stoa's: pid 0, as a stopped slot's.
            pid: if spawned {
                c["pid"].as_i64()? as i32
            } else {
                0
            },
            busy: c["busy"].as_u64()? as usize,
            capacity: c["capacity"].as_u64()? as usize,
            served: c["served"].as_u64()?,
            restarts: c["restarts"].as_u64()? as u32,
        });
    }
    Some(PoolStatus {
        line: pool.to_string(),
        waiting: pool["waiting"].as_u64()? as usize,
        procs,
    })
}

/// Pool `name`'s state now, from the status page (which SIGUSR1 used to
/// log; SIGUSR1 now reopens the log files, as nginx's does).
pub fn pool_status(server: &Server, name: &str) -> PoolStatus {
    let r = server.get(&format!("{STATUS_PATH}?format=json"));
    assert_eq!(r.status, 200, "status page: {r:?}");
    let text = r.text();
    parse_status(&text, name).unwrap_or_else(|| panic!("no pool {name} in the status page {text}"))
}

// ---------------------------------------------------------------------------
// Reports

/// `key=value` lines of an application's report.
pub fn report(body: &[u8]) -> BTreeMap<String, String> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A response with a 200 and its report.
pub fn ok_report(r: &Response) -> BTreeMap<String, String> {
    assert_eq!(r.status, 200, "{r:?}");
    report(&r.body)
}

pub fn field<'a>(rep: &'a BTreeMap<String, String>, k: &str) -> &'a str {
    rep.get(k)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("no `{k}` in report {rep:?}"))
}

pub fn pid_of(rep: &BTreeMap<String, String>) -> i32 {
    field(rep, "pid").parse().expect("pid")
}

pub fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

pub fn fnv_hex(data: &[u8]) -> String {
    format!("{:016x}", fnv1a(data))
}

/// CRC-32 (IEEE), as PHP's `hash('crc32b', ...)`.
pub fn crc32_hex(data: &[u8]) -> String {
    let mut crc: u32 = 0xffff_ffff;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xedb8_8320 & mask);
        }
    }
    format!("{:08x}", !crc)
}

/// Perl's `unpack('%32C*', ...)`.
pub fn sum32(data: &[u8]) -> u32 {
    data.iter().fold(0u32, |a, &b| a.wrapping_add(u32::from(b)))
}

/// A request with a body and `Content-Length`.
pub fn post(path: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// A request with a chunked body (pieces of `size`).
pub fn post_chunked(path: &str, body: &[u8], size: usize) -> Vec<u8> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/octet-stream\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for c in body.chunks(size.max(1)) {
        r.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        r.extend_from_slice(c);
        r.extend_from_slice(b"\r\n");
    }
    r.extend_from_slice(b"0\r\n\r\n");
    r
}

/// `n` requests at once, one thread each; each closure gets its index.
pub fn parallel<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                s.spawn({
                    let f = &f;
                    move || f(i)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("request thread panicked"))
            .collect()
    })
}

/// One request on a fresh connection, without panicking: the status, or
/// what went wrong.
pub fn try_request(server: &Server, bytes: &[u8]) -> Result<Response, String> {
    let mut c = Conn::try_connect(server.addr).map_err(|e| format!("connect: {e}"))?;
    c.try_send(bytes).map_err(|e| format!("send: {e}"))?;
    c.try_read_final().map_err(|e| format!("read: {e}"))
}

// ---------------------------------------------------------------------------
// /proc

pub use super::common::processes;

/// Whether `pid` runs (exists and is not a zombie).
pub fn alive(pid: i32) -> bool {
    processes()
        .iter()
        .any(|&(p, st, ..)| p == pid && st != 'Z' && st != 'X')
}

/// Live processes among `pids` or in their process groups (each spawned
/// application leads its own group).
pub fn survivors(pids: &[i32]) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|&(p, st, _, g)| st != 'Z' && st != 'X' && (pids.contains(&p) || pids.contains(&g)))
        .map(|(p, ..)| p)
        .collect()
}

/// Waits until nothing of `pids` (and their groups) runs.
pub fn wait_gone(pids: &[i32], within: Duration) -> Result<Duration, Vec<i32>> {
    super::common::wait_until_empty(within, || survivors(pids))
}

/// The command line of `pid`.
pub fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Resident memory of `pid` in KiB (VmRSS).
pub fn rss_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS for {pid}"))
}

pub fn kill(pid: i32, sig: i32) {
    // SAFETY: kill(2) on a pid the test read from a status line.
    let r = unsafe { libc::kill(pid, sig) };
    assert_eq!(
        r,
        0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}

// ---------------------------------------------------------------------------
// Applications started by the test itself

/// An application started with a listening Unix socket as fd 0, as a web
/// server would (FastCGI §2.2); killed (process group) on drop.
pub struct App {
    pub child: Child,
    pub sock: PathBuf,
}

impl App {
    pub fn spawn(sock: &Path, program: &str, args: &[&str]) -> App {
        let _ = std::fs::remove_file(sock);
        let l = UnixListener::bind(sock).unwrap_or_else(|e| panic!("bind {}: {e}", sock.display()));
        let fd: OwnedFd = l.into();
        use std::os::unix::process::CommandExt;
        let child = Command::new(program)
            .args(args)
            .env_clear()
            .stdin(Stdio::from(fd))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
        App {
            child,
            sock: sock.to_path_buf(),
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn connect(&self) -> FcgiClient {
        FcgiClient::connect(&self.sock)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        // SAFETY: the group of the child we spawned and have not reaped.
        unsafe {
            libc::kill(-self.pid(), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// php-fpm run by the test with a generated configuration: a static pool
/// of 4 on a socket in the test's directory. Stopped on drop.
pub struct PhpFpm {
    pub child: Child,
    pub sock: PathBuf,
    pub log: PathBuf,
}

impl PhpFpm {
    pub fn start(dir: &TempDir) -> PhpFpm {
        PhpFpm::start_with(dir, "")
    }

    /// With `extra` pool settings (`pm.max_requests = 3`, ...) appended.
    pub fn start_with(dir: &TempDir, extra: &str) -> PhpFpm {
        let bin = php_fpm_binary();
        let fpm_dir = dir.mkdir("fpm");
        let root = unsafe { libc::geteuid() } == 0;
        let template = std::fs::read_to_string(apps_dir().join("php-fpm.conf.in"))
            .expect("read tests/fastcgi-apps/php-fpm.conf.in");
        let conf = template
            .replace("@DIR@", &fpm_dir.display().to_string())
            .replace(
                "@USER@",
                if root {
                    "user = root\ngroup = root"
                } else {
                    ""
                },
            )
            .replace("@EXTRA@", extra);
        let conf_path = dir.write("fpm/php-fpm.conf", conf);
        let mut cmd = Command::new(&bin);
        cmd.arg("-F").arg("-y").arg(&conf_path);
        if root {
            cmd.arg("-R");
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let fpm = PhpFpm {
            child,
            sock: fpm_dir.join("php-fpm.sock"),
            log: fpm_dir.join("php-fpm.log"),
        };
        let until = Instant::now() + Duration::from_secs(10);
        while UnixStream::connect(&fpm.sock).is_err() {
            assert!(
                Instant::now() < until,
                "php-fpm never listened on {}; its log:\n{}",
                fpm.sock.display(),
                std::fs::read_to_string(&fpm.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        fpm
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for PhpFpm {
    fn drop(&mut self) {
        stop_master(&mut self.child);
    }
}

// ---------------------------------------------------------------------------
// A FastCGI client (the gateway side), to talk to an application directly

/// What an application answered to one request.
#[derive(Debug, Default, Clone)]
pub struct Answer {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub app_status: u32,
    pub protocol_status: Option<ProtocolStatus>,
}

pub struct FcgiClient {
    pub stream: UnixStream,
    pub gw: Connection,
    pub answers: HashMap<u16, Answer>,
    pub ended: Vec<u16>,
    pub values: Option<Values>,
}

impl FcgiClient {
    pub fn connect(sock: &Path) -> FcgiClient {
        let until = Instant::now() + Duration::from_secs(5);
        let stream = loop {
            match UnixStream::connect(sock) {
                Ok(s) => break s,
                Err(e) => {
                    assert!(Instant::now() < until, "connect {}: {e}", sock.display());
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("read timeout");
        FcgiClient {
            stream,
            gw: Connection::new(),
            answers: HashMap::new(),
            ended: Vec::new(),
            values: None,
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream
            .write_all(bytes)
            .expect("write to the application");
    }

    /// FCGI_GET_VALUES (§4.1) and its answer.
    pub fn get_values(&mut self) -> Values {
        let mut out = Vec::new();
        self.gw.query_values(&mut out);
        self.send(&out);
        let until = Instant::now() + Duration::from_secs(5);
        while self.values.is_none() {
            assert!(Instant::now() < until, "no FCGI_GET_VALUES_RESULT");
            self.pump();
        }
        self.values.clone().expect("values")
    }

    /// Starts a request with `params` and a whole body; returns its id.
    pub fn start(&mut self, role: Role, params: &[(&str, &str)], body: &[u8]) -> u16 {
        let mut out = Vec::new();
        let id = self
            .gw
            .start_request(role, true, params.iter().copied(), &mut out)
            .expect("start_request");
        if !body.is_empty() {
            self.gw.stdin(id, body, &mut out).expect("stdin");
        }
        if role != Role::Authorizer {
            self.gw.end_stdin(id, &mut out).expect("end stdin");
        }
        self.send(&out);
        id
    }

    /// Reads once and files the events; false at EOF.
    pub fn pump(&mut self) -> bool {
        let mut buf = [0u8; 64 * 1024];
        let n = match self.stream.read(&mut buf) {
            Ok(n) => n,
            Err(e) => panic!("reading from the application: {e}"),
        };
        if n == 0 {
            let _ = self.gw.eof();
        } else {
            self.gw.feed(&buf[..n]).expect("valid records");
        }
        while let Some(ev) = self.gw.poll_event() {
            match ev {
                Event::Stdout { id, data } => {
                    self.answers.entry(id).or_default().stdout.extend(data)
                }
                Event::Stderr { id, data } => {
                    self.answers.entry(id).or_default().stderr.extend(data)
                }
                Event::End {
                    id,
                    app_status,
                    protocol_status,
                } => {
                    let a = self.answers.entry(id).or_default();
                    a.app_status = app_status;
                    a.protocol_status = Some(protocol_status);
                    self.ended.push(id);
                }
                Event::Values(v) => self.values = Some(v),
                _ => {}
            }
        }
        n > 0
    }

    /// Waits for request `id` to end and takes its answer.
    pub fn wait(&mut self, id: u16) -> Answer {
        let until = Instant::now() + Duration::from_secs(10);
        while !self.ended.contains(&id) {
            assert!(Instant::now() < until, "request {id} never ended");
            assert!(self.pump(), "the application closed the connection");
        }
        self.ended.retain(|&e| e != id);
        self.answers.remove(&id).unwrap_or_default()
    }
}

/// The CGI params of a plain GET, for talking to an application directly.
pub fn cgi_params<'a>(method: &'a str, query: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("REQUEST_METHOD", method),
        ("QUERY_STRING", query),
        ("SCRIPT_NAME", "/direct"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("SERVER_NAME", "t"),
        ("SERVER_PORT", "80"),
    ]
}

/// Reads the rest of a `len`-byte body slowly (`chunk` bytes a read, a
/// `pause` every `every` reads), sampling the RSS of process `pid` at each
/// pause. Returns the body and the largest RSS seen, in KiB. Fails past
/// `deadline`, or if the connection closes early.
pub fn read_body_slowly(
    c: &mut Conn,
    len: usize,
    pid: i32,
    chunk: usize,
    every: usize,
    pause: Duration,
    deadline: Instant,
) -> (Vec<u8>, u64) {
    let mut max_rss = rss_kib(pid);
    let mut body = c.take_pending();
    body.reserve(len);
    let mut buf = vec![0u8; chunk];
    let mut reads = 0;
    while body.len() < len {
        let want = buf.len().min(len - body.len());
        let n = c.stream.read(&mut buf[..want]).expect("read body");
        assert!(n > 0, "closed after {} of {len} bytes", body.len());
        body.extend_from_slice(&buf[..n]);
        reads += 1;
        if reads % every == 0 {
            std::thread::sleep(pause);
            max_rss = max_rss.max(rss_kib(pid));
        }
        assert!(Instant::now() < deadline, "too slow");
    }
    (body, max_rss)
}
