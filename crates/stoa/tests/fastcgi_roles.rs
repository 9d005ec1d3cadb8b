//! FastCGI multiplexing and the Authorizer role end to end (section numbers
//! are those of the FastCGI 1.0 specification): many requests of one
//! worker on one transport connection to a process that multiplexes
//! (§3.3), aborts (§5.4), connection loss and backpressure on such a
//! connection, an application that refuses a second request with
//! CANT_MPX_CONN (§5.5), and routes guarded by an Authorizer (§6.3) in
//! front of FastCGI, CGI and static handlers.
//!
//! The applications are `stoa-hello-fcgi` (spawned by Stoa) and fakes
//! written here on a Unix socket with `stoa_fastcgi`'s record encoding, run
//! as external pools (`address = ["unix:..."]`).

mod common;
mod fastcgi_support;

use common::*;
use fastcgi_support::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use stoa_fastcgi::record::{self, Body, Decoder, RecordType, KEEP_CONN};
use stoa_fastcgi::{ProtocolStatus, Role};

// ---------------------------------------------------------------------------
// Sites

/// A site like [`Site::start`] but with `workers` worker threads.
fn site_with_workers(tag: &str, workers: usize, pools: &str, routes: &str) -> Site {
    let dir = TempDir::new(tag);
    dir.mkdir("www");
    populate_www(&dir);
    start_site(dir, workers, pools, routes)
}

fn start_site(dir: TempDir, workers: usize, pools: &str, routes: &str) -> Site {
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "{}{pools}\n[[site]]\nroot = \"www\"\n\n{routes}{STATUS_ROUTE}",
            prelude(workers)
        ),
    );
    let server = Server::with_config(&cfg);
    Site { server, dir }
}

/// A site whose pool `app` is one `stoa-hello-fcgi --mpx` process, at
/// `/app/`.
fn mpx_site(tag: &str, workers: usize) -> Site {
    site_with_workers(
        tag,
        workers,
        &hello_pool_args("app", &["--mpx"], "processes = 1"),
        &route("/app/", "app"),
    )
}

/// A `[[site.route]]` at `prefix` with `handler` (a `fastcgi`, `cgi` or
/// `static` line) guarded by the Authorizer pool `authz`.
fn guarded_route(prefix: &str, handler: &str, authz: &str) -> String {
    format!("[[site.route]]\nprefix = \"{prefix}\"\n{handler}\nauthorizer = \"{authz}\"\n\n")
}

/// The `param NAME=VALUE` lines of a `params=1` report, in order.
fn params_of(body: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.strip_prefix("param "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn param_values(params: &[(String, String)], name: &str) -> Vec<String> {
    params
        .iter()
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .collect()
}

fn get_report(site: &Site, path: &str) -> BTreeMap<String, String> {
    ok_report(&site.get(path))
}

fn num(rep: &BTreeMap<String, String>, k: &str) -> usize {
    field(rep, k)
        .parse()
        .unwrap_or_else(|_| panic!("`{k}` is not a number in {rep:?}"))
}

/// Headers of the client's response named `Variable-*` (§6.3: they are for
/// the web server, never for the client).
fn variable_headers(r: &Response) -> Vec<(String, String)> {
    r.headers
        .iter()
        .filter(|(n, _)| n.to_ascii_lowercase().starts_with("variable-"))
        .cloned()
        .collect()
}

// ---------------------------------------------------------------------------
// A fake application, on a Unix socket, written with the record encoding

/// How a [`Fake`] behaves.
#[derive(Clone, Copy)]
struct FakeOpts {
    /// FCGI_MPXS_CONNS as answered to FCGI_GET_VALUES (FCGI_MAX_CONNS and
    /// FCGI_MAX_REQS are 8).
    mpxs_conns: bool,
    /// Refuse a request begun while another runs on the same connection
    /// with END_REQUEST CANT_MPX_CONN (§5.5), whatever it said.
    refuse_second: bool,
    /// How long each answer takes.
    delay: Duration,
    /// Builds the answer (a CGI response) to a request.
    answer: fn(&Seen) -> Vec<u8>,
}

/// A request as the fake application received it.
#[derive(Clone, Debug)]
struct Seen {
    conn: usize,
    id: u16,
    role: Role,
    keep_conn: bool,
    params: Vec<(String, String)>,
    stdin: Vec<u8>,
    /// STDIN records that carried data (an Authorizer should get none).
    stdin_records: usize,
}

impl Seen {
    fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct FakeStats {
    conns: AtomicUsize,
    /// Requests refused with CANT_MPX_CONN.
    refused: AtomicUsize,
    /// Requests begun while another was running on their connection.
    overlapping: AtomicUsize,
    /// Connections closed by the web server without sending a record.
    unused: AtomicUsize,
    /// Requests answered, as received.
    seen: Mutex<Vec<Seen>>,
}

struct Fake {
    sock: PathBuf,
    stats: Arc<FakeStats>,
    stop: Arc<AtomicBool>,
    /// To wake the accept loop (shut down) when the test ends.
    listener: UnixListener,
    accept: Option<JoinHandle<()>>,
}

impl Fake {
    fn start(sock: &Path, opts: FakeOpts) -> Fake {
        let _ = std::fs::remove_file(sock);
        let l = UnixListener::bind(sock).unwrap_or_else(|e| panic!("bind {}: {e}", sock.display()));
        let listener = l.try_clone().expect("clone the listener");
        let stats = Arc::new(FakeStats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let accept = {
            let (stats, stop) = (stats.clone(), stop.clone());
            std::thread::spawn(move || {
                for s in l.incoming() {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(s) = s else {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    };
                    let n = stats.conns.fetch_add(1, Ordering::Relaxed) + 1;
                    let stats = stats.clone();
                    std::thread::spawn(move || fake_connection(s, n, opts, &stats));
                }
            })
        };
        Fake {
            sock: sock.to_path_buf(),
            stats,
            stop,
            listener,
            accept: Some(accept),
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.stats.seen.lock().expect("seen").clone()
    }

    fn pool(&self, name: &str) -> String {
        format!(
            "[[pool]]\nname = \"{name}\"\naddress = [\"unix:{}\"]\ntimeout = \"10s\"\n\n",
            self.sock.display()
        )
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop (its socket file may be gone already).
        use std::os::fd::AsRawFd;
        // SAFETY: shutdown(2) on a listening socket we own.
        unsafe {
            libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR);
        }
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// A request being received by the fake.
struct Incoming {
    role: Role,
    keep_conn: bool,
    params: Vec<u8>,
    params_done: bool,
    stdin: Vec<u8>,
    stdin_records: usize,
}

/// Serves one connection of the fake application: never trusts the
/// peer's bytes (a decoding error closes the connection).
fn fake_connection(stream: UnixStream, conn: usize, opts: FakeOpts, stats: &Arc<FakeStats>) {
    let Ok(reader) = stream.try_clone() else {
        return;
    };
    let writer = Arc::new(Mutex::new(stream));
    // Requests begun and not yet ended on this connection.
    let running: Arc<Mutex<BTreeSet<u16>>> = Arc::default();
    let mut incoming: HashMap<u16, Incoming> = HashMap::new();
    let mut dec = Decoder::new();
    let mut reader = reader;
    let mut buf = vec![0u8; 64 * 1024];
    let mut records = 0usize;
    let write = |bytes: &[u8]| {
        let mut w = writer.lock().unwrap_or_else(|e| e.into_inner());
        w.write_all(bytes).is_ok()
    };
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) | Err(_) => {
                if records == 0 {
                    stats.unused.fetch_add(1, Ordering::Relaxed);
                }
                return;
            }
            Ok(n) => n,
        };
        let mut pos = 0;
        while pos < n {
            let (used, rec) = match dec.decode(&buf[pos..n]) {
                Ok(x) => x,
                Err(_) => return,
            };
            pos += used;
            let Some(rec) = rec else { continue };
            records += 1;
            let id = rec.request_id;
            let mut out = Vec::new();
            let mut complete = None;
            match rec.body {
                Body::GetValues(_) => {
                    let mpx = if opts.mpxs_conns { "1" } else { "0" };
                    let _ = record::push_get_values_result(
                        &mut out,
                        [
                            ("FCGI_MAX_CONNS", "8"),
                            ("FCGI_MAX_REQS", "8"),
                            ("FCGI_MPXS_CONNS", mpx),
                        ],
                    );
                }
                Body::BeginRequest { role, flags } => {
                    let mut r = running.lock().unwrap_or_else(|e| e.into_inner());
                    if !r.is_empty() {
                        stats.overlapping.fetch_add(1, Ordering::Relaxed);
                    }
                    if opts.refuse_second && !r.is_empty() {
                        stats.refused.fetch_add(1, Ordering::Relaxed);
                        record::push_end_request(&mut out, id, 0, ProtocolStatus::CantMpxConn);
                    } else {
                        r.insert(id);
                        incoming.insert(
                            id,
                            Incoming {
                                role,
                                keep_conn: flags & KEEP_CONN != 0,
                                params: Vec::new(),
                                params_done: false,
                                stdin: Vec::new(),
                                stdin_records: 0,
                            },
                        );
                    }
                }
                Body::Params(c) => {
                    if let Some(inc) = incoming.get_mut(&id) {
                        if c.is_empty() {
                            inc.params_done = true;
                            // §6.3: an Authorizer gets no body to wait for.
                            if inc.role == Role::Authorizer {
                                complete = incoming.remove(&id);
                            }
                        } else {
                            inc.params.extend_from_slice(c);
                        }
                    }
                }
                Body::Stdin(c) => {
                    if let Some(inc) = incoming.get_mut(&id) {
                        if c.is_empty() {
                            if inc.params_done {
                                complete = incoming.remove(&id);
                            }
                        } else {
                            inc.stdin.extend_from_slice(c);
                            inc.stdin_records += 1;
                        }
                    }
                }
                Body::AbortRequest => {
                    // Answered when its delay is over, like any request.
                }
                _ => {}
            }
            if !out.is_empty() && !write(&out) {
                return;
            }
            let Some(inc) = complete else { continue };
            let Ok(params) = stoa_fastcgi::nv::parse_pairs(&inc.params) else {
                return;
            };
            let seen = Seen {
                conn,
                id,
                role: inc.role,
                keep_conn: inc.keep_conn,
                params: params
                    .iter()
                    .map(|(k, v)| {
                        (
                            String::from_utf8_lossy(k).into_owned(),
                            String::from_utf8_lossy(v).into_owned(),
                        )
                    })
                    .collect(),
                stdin: inc.stdin,
                stdin_records: inc.stdin_records,
            };
            let (writer, running, stats) = (writer.clone(), running.clone(), stats.clone());
            std::thread::spawn(move || {
                std::thread::sleep(opts.delay);
                let mut out = Vec::new();
                record::push_stream(&mut out, RecordType::Stdout, id, &(opts.answer)(&seen));
                record::push_stream_end(&mut out, RecordType::Stdout, id);
                record::push_end_request(&mut out, id, 0, ProtocolStatus::RequestComplete);
                let keep = seen.keep_conn;
                stats
                    .seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(seen);
                // Free before END_REQUEST goes out: the web server may
                // begin the next request as soon as it reads it.
                running
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
                let w = writer.lock().unwrap_or_else(|e| e.into_inner());
                let mut w: &UnixStream = &w;
                let _ = w.write_all(&out);
                if !keep {
                    let _ = w.shutdown(std::net::Shutdown::Both);
                }
            });
        }
    }
}

/// A Responder's answer: the query and the connection and id it came on.
fn fake_report(s: &Seen) -> Vec<u8> {
    let body = format!(
        "query={}\nconn={}\nrequest_id={}\nbody_len={}\nbody_fnv={}\n",
        s.param("QUERY_STRING").unwrap_or(""),
        s.conn,
        s.id,
        s.stdin.len(),
        fnv_hex(&s.stdin)
    );
    format!(
        "Status: 200\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

// ---------------------------------------------------------------------------
// Multiplexing (§3.3)

#[test]
fn spec_3_3_forty_concurrent_requests_to_a_multiplexing_process_share_one_connection_per_worker() {
    let site = mpx_site("roles-mpx-conns", 2);
    let warm = ok_report(&site.get("/app/?warm"));
    assert_eq!(num(&warm, "conns"), 1, "{warm:?}");
    let t0 = Instant::now();
    let reps = parallel(40, |i| {
        let r = try_request(&site, &get(&format!("/app/?sleep=500&n={i}")))
            .unwrap_or_else(|e| panic!("request {i}: {e}"));
        ok_report(&r)
    });
    let took = t0.elapsed();
    for (i, r) in reps.iter().enumerate() {
        assert_eq!(field(r, "query"), format!("sleep=500&n={i}"), "{r:?}");
        assert_eq!(field(r, "keep_conn"), "1", "{r:?}");
    }
    let pids: BTreeSet<i32> = reps.iter().map(pid_of).collect();
    assert_eq!(pids.len(), 1, "one process: {pids:?}");
    let peak = reps.iter().map(|r| num(r, "peak")).max().unwrap_or(0);
    assert!(peak >= 30, "at most {peak} of 40 requests ran at once");
    assert!(
        took < Duration::from_secs(4),
        "40 x 500 ms took {took:?}: not run concurrently"
    );
    // Requests running at once on one connection have distinct ids: over
    // two multiplexed connections an id serves at most two of them (three
    // allows for a request that started once another had ended). Without
    // multiplexing every request would be id 1.
    let mut per_id: BTreeMap<usize, usize> = BTreeMap::new();
    for r in &reps {
        *per_id.entry(num(r, "request_id")).or_default() += 1;
    }
    let most = per_id.values().copied().max().unwrap_or(0);
    assert!(
        most <= 3,
        "a request id was used by {most} of the concurrent requests: not multiplexed over \
         one connection per worker: {per_id:?}"
    );
    let after = ok_report(&site.get("/app/?after"));
    let conns = num(&after, "conns");
    assert!(
        conns <= 3,
        "Stoa opened {conns} transport connections to the process for 41 requests from 2 \
         workers: each worker should keep one multiplexed connection to it (at most 2, plus \
         the FCGI_GET_VALUES connection of the first request); status: {}",
        site.status("app").line
    );
}

#[test]
fn spec_3_3_concurrent_requests_of_one_worker_share_its_connection_with_distinct_request_ids() {
    // A fake application that multiplexes and tells which connection each
    // request came on. One worker, so one multiplexed connection.
    let dir = TempDir::new("roles-mpx-fake");
    dir.mkdir("www");
    let fake = Fake::start(
        &dir.join("fake.sock"),
        FakeOpts {
            mpxs_conns: true,
            refuse_second: false,
            delay: Duration::from_millis(400),
            answer: fake_report,
        },
    );
    let site = start_site(dir, 1, &fake.pool("ext"), &route("/ext/", "ext"));
    let warm = ok_report(&site.get("/ext/?warm"));
    let t0 = Instant::now();
    let rs = parallel(8, |i| try_request(&site, &get(&format!("/ext/?n={i}"))));
    let took = t0.elapsed();
    let mut ids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (i, r) in rs.iter().enumerate() {
        let rep = ok_report(r.as_ref().unwrap_or_else(|e| panic!("request {i}: {e}")));
        assert_eq!(field(&rep, "query"), format!("n={i}"));
        ids.entry(field(&rep, "conn").to_owned())
            .or_default()
            .insert(field(&rep, "request_id").to_owned());
    }
    let overlapping = fake.stats.overlapping.load(Ordering::Relaxed);
    eprintln!(
        "8 requests of one worker: connections used {ids:?}, opened {}, closed unused {}",
        fake.stats.conns.load(Ordering::Relaxed),
        fake.stats.unused.load(Ordering::Relaxed)
    );
    assert_eq!(
        ids.keys().collect::<Vec<_>>(),
        [field(&warm, "conn")],
        "the requests of one worker should all go over its multiplexed connection (the \
         first request's, adopted): {ids:?}"
    );
    assert_eq!(
        ids.values().map(BTreeSet::len).sum::<usize>(),
        8,
        "concurrent requests on one connection need distinct ids: {ids:?}"
    );
    assert!(overlapping >= 7, "only {overlapping} requests overlapped");
    assert!(
        took < Duration::from_millis(1500),
        "8 x 400 ms took {took:?}"
    );
}

#[test]
fn spec_3_3_kill_9_of_a_multiplexing_process_sends_its_in_flight_gets_again_to_the_restarted_process(
) {
    let site = mpx_site("roles-mpx-kill", 2);
    get_report(&site, "/app/?warm");
    let victim = site.wait_running("app", 1).proc(0).pid;
    let t0 = Instant::now();
    let (results, killed_at) = std::thread::scope(|s| {
        let hs: Vec<_> = (0..10)
            .map(|i| {
                let site = &site;
                s.spawn(move || {
                    let r = try_request(site, &get(&format!("/app/?sleep=3000&k={i}")));
                    (t0.elapsed(), r)
                })
            })
            .collect();
        // All ten in flight (the process reports them as running).
        std::thread::sleep(Duration::from_millis(800));
        let killed_at = t0.elapsed();
        kill(victim, libc::SIGKILL);
        let results: Vec<_> = hs
            .into_iter()
            .map(|h| h.join().expect("request thread"))
            .collect();
        (results, killed_at)
    });
    // A GET lost with its process before any byte of its response is sent
    // again (nginx's `fastcgi_next_upstream error`): with one process in
    // the pool, to the one that replaces it. Each takes its 3 s again.
    for (t, r) in &results {
        match r {
            Ok(resp) if resp.status == 200 => {
                let rep = ok_report(resp);
                assert_ne!(
                    pid_of(&rep),
                    victim,
                    "a request in flight on the killed process was answered by it"
                );
            }
            Ok(resp) => panic!(
                "a GET in flight on the killed process got {} {:?}",
                resp.status,
                String::from_utf8_lossy(&resp.body)
            ),
            Err(e) => panic!("a GET in flight on the killed process failed: {e}"),
        }
        assert!(
            *t < killed_at + Duration::from_secs(10),
            "a request in flight on the killed process (killed at {killed_at:?}) ended only \
             at {t:?}: {r:?}"
        );
    }
    let st = site.wait_status("app", Duration::from_secs(5), |s| {
        s.proc(0).restarts == 1 && s.proc(0).pid > 0 && s.proc(0).state == "Running"
    });
    assert_ne!(st.proc(0).pid, victim);
    assert!(!alive(victim));
    // Later requests get a new connection to the new process.
    let reps = parallel(10, |i| {
        let r = try_request(&site, &get(&format!("/app/?sleep=100&after={i}")))
            .unwrap_or_else(|e| panic!("request {i} after the restart: {e}"));
        ok_report(&r)
    });
    for (i, r) in reps.iter().enumerate() {
        assert_eq!(field(r, "query"), format!("sleep=100&after={i}"));
        assert_eq!(pid_of(r), st.proc(0).pid);
    }
    // No slot was leaked by the failed requests.
    site.wait_status("app", Duration::from_secs(3), |s| s.proc(0).busy == 0);
}

#[test]
fn spec_5_4_a_client_that_leaves_aborts_only_its_request_on_a_multiplexed_connection() {
    // One worker: every request goes over the same connection.
    let site = mpx_site("roles-mpx-abort", 1);
    get_report(&site, "/app/?warm");
    let from = site.stderr().len();
    let t0 = Instant::now();
    let reps = std::thread::scope(|s| {
        let stay: Vec<_> = (0..6)
            .map(|i| {
                let site = &site;
                s.spawn(move || {
                    let mut c = site.connect();
                    c.stream
                        .set_read_timeout(Some(Duration::from_secs(8)))
                        .expect("timeout");
                    c.send(&get(&format!("/app/?sleep=2000&stay={i}")));
                    c.try_read_final().map(|r| (t0.elapsed(), r))
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        {
            let mut c = site.connect();
            c.send(&get("/app/?sleep=2000&abort-me"));
            std::thread::sleep(Duration::from_millis(500));
        } // the client leaves
        stay.into_iter()
            .map(|h| h.join().expect("request thread"))
            .collect::<Vec<_>>()
    });
    let mut ids = BTreeSet::new();
    for (i, r) in reps.iter().enumerate() {
        let (t, r) = r
            .as_ref()
            .unwrap_or_else(|e| panic!("request {i} on the shared connection failed: {e}"));
        let rep = ok_report(r);
        assert_eq!(field(&rep, "query"), format!("sleep=2000&stay={i}"));
        assert!(*t >= Duration::from_millis(2000), "{t:?}");
        ids.insert(num(&rep, "request_id"));
    }
    assert_eq!(ids.len(), 6, "one connection, so distinct ids: {ids:?}");
    let log = || site.stderr()[from..].to_owned();
    assert!(
        site.wait_stderr(from, "abort-me) aborted after", Duration::from_secs(2)),
        "the application never got FCGI_ABORT_REQUEST for the request whose client left; \
         log:\n{}",
        log()
    );
    // It was aborted when the client left (~700 ms), not at its end.
    let ms: u64 = log()
        .split("abort-me) aborted after ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("abort delay in the log");
    assert!(ms < 1500, "aborted only after {ms} ms");
    let after = ok_report(&site.get("/app/?after"));
    assert_eq!(num(&after, "inflight"), 1, "{after:?}");
    assert!(
        num(&after, "conns") <= 2,
        "one worker should use one multiplexed connection: {after:?}"
    );
    site.wait_status("app", Duration::from_secs(3), |s| s.proc(0).busy == 0);
}

#[test]
fn spec_3_3_a_slow_client_of_a_20_mb_response_on_a_multiplexed_connection_keeps_memory_bounded_and_others_complete(
) {
    const LEN: usize = 20_000_000;
    let site = mpx_site("roles-mpx-slow", 1);
    get_report(&site, "/app/?warm");
    let base = rss_kib(site.pid());
    let mut c = site.connect();
    c.set_recv_buffer(64 * 1024);
    c.send(&get(&format!("/app/?big={LEN}&seed=5")));
    let head = c.try_read(true).expect("head of the big response");
    assert_eq!(head.status, 200, "{head:?}");
    assert_eq!(head.content_length(), Some(LEN as u64));
    let t0 = Instant::now();
    let (body, max_rss, others) = std::thread::scope(|s| {
        // Other requests on the same (only) multiplexed connection while
        // the big one is stalled and then read slowly.
        let others = s.spawn(|| {
            (0..5)
                .map(|i| {
                    std::thread::sleep(Duration::from_millis(200));
                    let mut c = site.connect();
                    c.stream
                        .set_read_timeout(Some(Duration::from_secs(20)))
                        .expect("timeout");
                    c.send(&get(&format!("/app/?other={i}")));
                    c.try_read_final().map(|r| (t0.elapsed(), r))
                })
                .collect::<Vec<_>>()
        });
        std::thread::sleep(Duration::from_millis(1000));
        let (body, max_rss) = read_body_slowly(
            &mut c,
            LEN,
            site.pid(),
            128 * 1024,
            8,
            Duration::from_millis(20),
            t0 + Duration::from_secs(40),
        );
        (body, max_rss, others.join().expect("other requests"))
    });
    let done = t0.elapsed();
    eprintln!(
        "20 MB to a slow client on a multiplexed connection: server RSS {base} KiB before, \
         at most {max_rss} KiB during; done at {done:?}"
    );
    assert!(body == pattern(LEN, 5), "the 20 MB body arrived damaged");
    for (i, r) in others.iter().enumerate() {
        let (t, r) = r
            .as_ref()
            .unwrap_or_else(|e| panic!("request {i} beside the slow client failed: {e}"));
        let rep = ok_report(r);
        assert_eq!(field(&rep, "query"), format!("other={i}"));
        assert!(*t < done + Duration::from_secs(1), "{t:?} vs {done:?}");
    }
    assert!(
        max_rss < base + 12 * 1024,
        "server RSS grew from {base} KiB to {max_rss} KiB for a 20 MB response to a slow \
         client: it should hold at most 256 KiB of it"
    );
    let after = ok_report(&site.get("/app/?after"));
    assert!(num(&after, "conns") <= 2, "{after:?}");
}

// ---------------------------------------------------------------------------
// CANT_MPX_CONN (§5.5)

#[test]
fn spec_5_5_an_application_that_says_it_multiplexes_but_answers_cant_mpx_conn_gets_one_request_per_connection(
) {
    let dir = TempDir::new("roles-cantmpx");
    dir.mkdir("www");
    let fake = Fake::start(
        &dir.join("fake.sock"),
        FakeOpts {
            mpxs_conns: true,
            refuse_second: true,
            delay: Duration::from_millis(300),
            answer: fake_report,
        },
    );
    let site = start_site(dir, 2, &fake.pool("ext"), &route("/ext/", "ext"));
    let warm = ok_report(&site.get("/ext/?warm"));
    assert_eq!(field(&warm, "query"), "warm");
    let batch = |tag: &str| {
        let t0 = Instant::now();
        let rs = parallel(8, |i| {
            // GETs, and chunked POSTs (read whole, so they can be resent).
            let req = if i % 2 == 0 {
                get(&format!("/ext/?{tag}={i}"))
            } else {
                post_chunked(
                    &format!("/ext/?{tag}={i}"),
                    &pattern(3000 + i, i as u64),
                    1000,
                )
            };
            try_request(&site, &req)
        });
        for (i, r) in rs.iter().enumerate() {
            let r = r
                .as_ref()
                .unwrap_or_else(|e| panic!("{tag} request {i}: {e}"));
            let rep = ok_report(r);
            assert_eq!(field(&rep, "query"), format!("{tag}={i}"), "{rep:?}");
            if i % 2 == 1 {
                let body = pattern(3000 + i, i as u64);
                assert_eq!(field(&rep, "body_len"), body.len().to_string());
                assert_eq!(field(&rep, "body_fnv"), fnv_hex(&body));
            }
        }
        t0.elapsed()
    };
    let took = batch("first");
    let refused = fake.stats.refused.load(Ordering::Relaxed);
    eprintln!(
        "CANT_MPX_CONN: {refused} refusals, {} connections",
        fake.stats.conns.load(Ordering::Relaxed)
    );
    assert!(
        refused >= 1,
        "Stoa never put two requests on one connection although the application said \
         FCGI_MPXS_CONNS=1: the CANT_MPX_CONN fallback was not exercised"
    );
    assert!(took < Duration::from_secs(4), "8 x 300 ms took {took:?}");
    // Multiplexing to that process stopped: no more refusals.
    let took = batch("second");
    assert_eq!(
        fake.stats.refused.load(Ordering::Relaxed),
        refused,
        "Stoa kept multiplexing to a process that answered CANT_MPX_CONN"
    );
    assert!(took < Duration::from_secs(4), "8 x 300 ms took {took:?}");
    let seen = fake.seen();
    assert_eq!(seen.len(), 17, "each request answered once: {seen:?}");
    assert!(seen.iter().all(|s| s.role == Role::Responder), "{seen:?}");
}

// ---------------------------------------------------------------------------
// Authorizer routes (§6.3)

/// Pools `authz` (`stoa-hello-fcgi --authorizer`) and `app` (a responder),
/// one process each.
fn authz_pools() -> String {
    format!(
        "{}{}",
        hello_pool_args("authz", &["--authorizer"], "processes = 1"),
        hello_pool("app", "processes = 1")
    )
}

const GOOD: &str = "Authorization: Bearer good";

fn assert_denied(r: &Response, what: &str) {
    assert_eq!(r.status, 403, "{what}: {r:?}");
    assert_eq!(r.text(), "forbidden\n", "{what}: the Authorizer's body");
    assert!(
        variable_headers(r).is_empty(),
        "{what}: Variable-* headers reached the client: {r:?}"
    );
}

#[test]
fn spec_6_3_an_authorizer_route_passes_a_403_to_the_client_and_a_200_to_the_responder_with_its_variables(
) {
    let site = Site::start(
        "roles-authz",
        &authz_pools(),
        &guarded_route("/app/", "fastcgi = { pool = \"app\" }", "authz"),
    );
    for (what, headers) in [
        ("no Authorization", vec![]),
        ("a bad token", vec!["Authorization: Bearer bad"]),
    ] {
        let r = site.request(&request("GET", "/app/x?params=1", &headers));
        assert_denied(&r, what);
        assert!(
            r.header("x-pid").is_none(),
            "{what}: the responder answered: {r:?}"
        );
    }
    let r = site.request(&request("GET", "/app/x?params=1&n=1", &[GOOD]));
    assert_eq!(r.status, 200, "{r:?}");
    assert!(variable_headers(&r).is_empty(), "{r:?}");
    let rep = report(&r.body);
    assert_eq!(field(&rep, "role"), "Responder");
    assert_eq!(field(&rep, "query"), "params=1&n=1");
    assert_eq!(
        field(&rep, "served"),
        "0",
        "the denied requests reached the responder: {rep:?}"
    );
    let params = params_of(&r.body);
    assert_eq!(
        param_values(&params, "USER"),
        ["alice"],
        "Variable-USER of the Authorizer's 200 should be the responder's USER: {params:?}"
    );
    assert_eq!(param_values(&params, "SCRIPT_NAME"), ["/app/x"]);
    site.wait_status("app", Duration::from_secs(2), |s| s.proc(0).served == 1);
    site.wait_status("authz", Duration::from_secs(2), |s| s.proc(0).served == 3);
    std::thread::sleep(Duration::from_millis(200));
    let st = site.status("app");
    assert_eq!(st.proc(0).served, 1, "{st:?}");
}

#[test]
fn spec_6_3_the_authorizer_gets_no_body_nor_content_length_or_path_params_and_its_variables_replace_the_responders(
) {
    fn allow(_: &Seen) -> Vec<u8> {
        b"Status: 200\r\nVariable-USER: bob\r\nVariable-HTTP_X_ROLE: admin\r\n\
          Content-Type: text/plain\r\nContent-Length: 11\r\n\r\nAUTHZ-BODY\n"
            .to_vec()
    }
    let dir = TempDir::new("roles-authz-params");
    dir.mkdir("www");
    populate_www(&dir);
    let fake = Fake::start(
        &dir.join("authz.sock"),
        FakeOpts {
            mpxs_conns: false,
            refuse_second: false,
            delay: Duration::ZERO,
            answer: allow,
        },
    );
    let pools = format!(
        "{}{}",
        fake.pool("authz"),
        hello_pool("app", "processes = 1")
    );
    let site = start_site(
        dir,
        2,
        &pools,
        &guarded_route("/app/", "fastcgi = { pool = \"app\" }", "authz"),
    );
    let req = b"POST /app/some/path?params=1 HTTP/1.1\r\nHost: t\r\nX-Role: user\r\n\
                Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello";
    let r = site.request(req);
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        !contains(&r.body, b"AUTHZ-BODY"),
        "the Authorizer's body reached the client: {r:?}"
    );
    assert!(variable_headers(&r).is_empty(), "{r:?}");
    let rep = report(&r.body);
    assert_eq!(field(&rep, "method"), "POST");
    assert_eq!(field(&rep, "body_len"), "5", "the responder gets the body");
    assert_eq!(field(&rep, "content_length"), "5");
    let params = params_of(&r.body);
    assert_eq!(param_values(&params, "USER"), ["bob"], "{params:?}");
    assert_eq!(
        param_values(&params, "HTTP_X_ROLE"),
        ["admin"],
        "a Variable-NAME replaces the param NAME the request would have set: {params:?}"
    );

    let seen = fake.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let a = &seen[0];
    assert_eq!(a.role, Role::Authorizer);
    for absent in [
        "CONTENT_LENGTH",
        "PATH_INFO",
        "PATH_TRANSLATED",
        "SCRIPT_NAME",
        "SCRIPT_FILENAME",
        "DOCUMENT_ROOT",
    ] {
        assert_eq!(
            a.param(absent),
            None,
            "{absent} sent to the Authorizer: {a:?}"
        );
    }
    assert_eq!(a.param("REQUEST_METHOD"), Some("POST"), "{a:?}");
    assert_eq!(a.param("QUERY_STRING"), Some("params=1"), "{a:?}");
    assert_eq!(a.param("HTTP_X_ROLE"), Some("user"), "{a:?}");
    assert_eq!(
        a.param("REQUEST_URI"),
        Some("/app/some/path?params=1"),
        "{a:?}"
    );
    assert!(
        a.stdin.is_empty() && a.stdin_records == 0,
        "the Authorizer got the request body: {a:?}"
    );
}

#[test]
fn spec_6_3_an_authorizer_guards_cgi_and_static_routes_and_local_redirects_into_them() {
    require(PERL, "perl");
    let dir = TempDir::new("roles-authz-cgi");
    dir.mkdir("www");
    populate_www(&dir);
    dir.write("www/priv/secret.txt", "top secret\n");
    let env_pl =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/cgi-scripts/cgi-bin/env.pl");
    let script = dir.join("cgi-bin/env.pl");
    dir.mkdir("cgi-bin");
    std::fs::copy(&env_pl, &script).expect("copy env.pl");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let routes = format!(
        "{}{}{}",
        guarded_route("/cgi-bin/", "cgi = { dir = \"cgi-bin\" }", "authz"),
        guarded_route("/priv/", "static = { root = \"www\" }", "authz"),
        route("/pub/", "app")
    );
    let site = start_site(dir, 2, &authz_pools(), &routes);

    // CGI.
    let r = site.get("/cgi-bin/env.pl");
    assert_denied(&r, "CGI without a token");
    assert!(r.header("x-script").is_none(), "the script ran: {r:?}");
    let r = site.request(&request("GET", "/cgi-bin/env.pl/extra?q=1", &[GOOD]));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("x-script"), Some("env.pl"), "{r:?}");
    assert!(variable_headers(&r).is_empty(), "{r:?}");
    let text = r.text();
    let env: BTreeMap<&str, &str> = text
        .split("--body--")
        .next()
        .unwrap_or("")
        .lines()
        .filter_map(|l| l.split_once('='))
        .collect();
    assert_eq!(env.get("USER"), Some(&"alice"), "{text}");
    assert_eq!(env.get("PATH_INFO"), Some(&"/extra"), "{text}");
    assert_eq!(env.get("QUERY_STRING"), Some(&"q=1"), "{text}");

    // Static.
    let r = site.get("/priv/secret.txt");
    assert_denied(&r, "static without a token");
    let r = site.request(&request(
        "GET",
        "/priv/secret.txt",
        &["Authorization: Bearer bad"],
    ));
    assert_denied(&r, "static with a bad token");
    let r = site.request(&request("GET", "/priv/secret.txt", &[GOOD]));
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "top secret\n"),
        "{r:?}"
    );
    assert!(variable_headers(&r).is_empty(), "{r:?}");

    // A local redirect from a public route into a guarded one is
    // authorized too.
    let r = site.get("/pub/?location=/priv/secret.txt");
    assert_denied(&r, "a local redirect into the guarded route");
    let r = site.request(&request("GET", "/pub/?location=/priv/secret.txt", &[GOOD]));
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "top secret\n"),
        "{r:?}"
    );
    // Seven requests, each authorized once (the public route has no
    // Authorizer; the redirect target has).
    site.wait_status("authz", Duration::from_secs(2), |s| s.proc(0).served == 7);
}

#[test]
fn spec_6_3_a_denied_post_on_a_kept_alive_connection_has_its_body_skipped_and_the_next_request_is_answered(
) {
    let site = Site::start(
        "roles-authz-keepalive",
        &authz_pools(),
        &guarded_route("/app/", "fastcgi = { pool = \"app\" }", "authz"),
    );
    // A body that is itself a request: if it were not skipped it would be
    // read as the next request on the connection (and authorized).
    let smuggled = format!("GET /app/?smuggled HTTP/1.1\r\nHost: t\r\n{GOOD}\r\n\r\n");
    let mut padded = smuggled.clone().into_bytes();
    padded.extend_from_slice(&[b'x'; 20_000]);
    let padded_req = post("/app/?denied-padded", &padded);
    for (how, req) in [
        ("Content-Length", post("/app/?denied", smuggled.as_bytes())),
        ("Content-Length, 20 KB", padded_req),
        (
            "chunked",
            post_chunked("/app/?denied", smuggled.as_bytes(), 7),
        ),
    ] {
        let mut c = site.connect();
        let r = c.request(&req);
        assert_denied(&r, how);
        for i in 0..2 {
            let r = c.request(&request("GET", &format!("/app/?next={i}"), &[GOOD]));
            let rep = ok_report(&r);
            assert_eq!(
                field(&rep, "query"),
                format!("next={i}"),
                "{how}: the request after a denied POST was not the one answered"
            );
            assert_eq!(field(&rep, "method"), "GET");
        }
        assert!(
            c.stays_silent(Duration::from_millis(300)),
            "{how}: an extra response came: {:?}",
            String::from_utf8_lossy(c.pending())
        );
    }
    site.wait_status("app", Duration::from_secs(2), |s| s.proc(0).served == 6);
    let st = site.status("app");
    assert_eq!(
        st.proc(0).served,
        6,
        "the responder served a request that was not sent: {st:?}"
    );
    // A denied request with Expect: 100-continue: the 403 (no 100
    // Continue is due, §6.3 leaves the body unread), and whether or not
    // the client sends its body anyway, the next request on the
    // connection is answered as itself, or the connection is closed:
    // never the body taken for a request.
    let mut c = site.connect();
    c.send(
        b"POST /app/?expect HTTP/1.1\r\nHost: t\r\nContent-Length: 29\r\n\
          Expect: 100-continue\r\n\r\n",
    );
    let mut r = c.try_read(false).expect("response to Expect: 100-continue");
    if r.status == 100 {
        c.send(b"GET /app/?smuggled HTTP/1.1\r\n");
        r = c.read_final();
    } else {
        c.send(b"GET /app/?smuggled HTTP/1.1\r\n");
    }
    assert_denied(&r, "Expect: 100-continue");
    let next = request("GET", "/app/?after-expect", &[GOOD]);
    match c.try_send(&next).and_then(|_| c.try_read_final()) {
        Ok(r) => {
            let rep = ok_report(&r);
            assert_eq!(field(&rep, "query"), "after-expect");
        }
        Err(e) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
            ),
            "after a denied Expect: 100-continue request the connection neither answered \
             the next request nor closed: {e}"
        ),
    }
}

// ---------------------------------------------------------------------------
// The demo application itself

#[test]
fn spec_4_1_the_threaded_hello_application_counts_its_connections_and_holds_fcgi_max_reqs_over_all_of_them(
) {
    let dir = TempDir::new("roles-hello-threaded");
    let app = App::spawn(
        &dir.join("app.sock"),
        HELLO,
        &["--mpx", "--max-conns", "3", "--max-reqs", "2"],
    );
    let mut clients: Vec<FcgiClient> = (0..3).map(|_| app.connect()).collect();
    let v = clients[0].get_values();
    assert_eq!(
        (v.max_conns, v.max_reqs, v.mpxs_conns),
        (Some(3), Some(2), Some(true))
    );
    let a = clients[0].start(Role::Responder, &cgi_params("GET", "sleep=600&a"), b"");
    let b = clients[1].start(Role::Responder, &cgi_params("GET", "sleep=600&b"), b"");
    std::thread::sleep(Duration::from_millis(200));
    // A third request, on a third connection, while two run.
    let c = clients[2].start(Role::Responder, &cgi_params("GET", "c"), b"");
    let over = clients[2].wait(c);
    let text = String::from_utf8_lossy(&over.stdout).into_owned();
    assert!(text.starts_with("Status: 503\r\n"), "{text:?}");
    for (i, id) in [(0, a), (1, b)] {
        let ans = clients[i].wait(id);
        assert_eq!(ans.protocol_status, Some(ProtocolStatus::RequestComplete));
        let rep = report(&ans.stdout);
        assert_eq!(field(&rep, "conns"), "3", "{rep:?}");
        assert_eq!(field(&rep, "peak"), "2", "{rep:?}");
    }
    // A fourth connection waits (FCGI_MAX_CONNS=3) until one closes.
    let mut d = app.connect();
    let id = d.start(Role::Responder, &cgi_params("GET", "d"), b"");
    d.stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    let early = d.stream.read(&mut byte);
    assert!(
        early.as_ref().is_err_and(|e| matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )),
        "a fourth connection was served beside three: {early:?}"
    );
    d.stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    drop(clients.pop());
    let rep = report(&d.wait(id).stdout);
    assert_eq!(field(&rep, "conns"), "4", "{rep:?}");
    assert_eq!(field(&rep, "query"), "d");
}
