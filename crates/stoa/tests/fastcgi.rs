//! FastCGI end to end (issue 4; section numbers are those of the FastCGI
//! 1.0 specification): real applications behind the real `stoa` binary: a
//! C application built here against libfcgi, a Perl one with the FCGI
//! module, php-fpm as an external pool, php-cgi spawned by Stoa, and
//! Stoa's own Rust application library (`stoa-hello-fcgi`). Then the pool
//! machinery: affinity, crashes, recycling, dynamic growth, the queue,
//! timeouts, aborts, request and response bodies, multiplexing, process
//! hygiene (no orphans, reload), and start-up failures.
//!
//! Needs the Debian packages libfcgi-dev, libfcgi-perl, php-fpm, php-cgi
//! and gcc; a missing one fails the test that needs it with a message
//! naming the package.

mod common;
mod fastcgi_support;

use common::*;
use fastcgi_support::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read;
use std::time::{Duration, Instant};
use stoa_fastcgi::{ProtocolStatus, Role};

/// A site with one pool `app` of `stoa-hello-fcgi` (extra pool keys in
/// `extra`) routed at `/app/`.
fn hello_site(tag: &str, extra: &str) -> Site {
    Site::start(tag, &hello_pool("app", extra), &route("/app/", "app"))
}

fn get_report(site: &Site, path: &str) -> BTreeMap<String, String> {
    ok_report(&site.get(path))
}

// ---------------------------------------------------------------------------
// Real applications

#[test]
fn spec_2_2_a_c_libfcgi_application_spawned_with_its_socket_on_fd_0_answers_gets_and_posts() {
    let app = c_app();
    let dir = TempDir::new("fcgi-c");
    dir.mkdir("www");
    // A relative command resolves against the config file's directory.
    std::fs::copy(&app, dir.join("hello_fcgi")).expect("copy the C application");
    let site = Site::start_in(
        dir,
        "[[pool]]\nname = \"c\"\ncommand = [\"./hello_fcgi\"]\nprocesses = 2\n",
        &route("/c/", "c"),
    );
    let st = site.wait_running("c", 2);
    let rep = get_report(&site, "/c/hello?a=1&b=two");
    assert_eq!(field(&rep, "lang"), "c");
    assert_eq!(field(&rep, "method"), "GET");
    assert_eq!(field(&rep, "query"), "a=1&b=two");
    assert_eq!(field(&rep, "body_len"), "0");
    assert!(st.pids().contains(&pid_of(&rep)), "{rep:?} vs {st:?}");

    // A 1 MiB body, with Content-Length and chunked.
    let body = pattern(1 << 20, 3);
    for req in [post("/c/p", &body), post_chunked("/c/p", &body, 10_000)] {
        let rep = ok_report(&site.request(&req));
        assert_eq!(field(&rep, "method"), "POST");
        assert_eq!(field(&rep, "content_length"), (1 << 20).to_string());
        assert_eq!(field(&rep, "body_len"), (1 << 20).to_string());
        assert_eq!(field(&rep, "body_fnv"), fnv_hex(&body));
    }

    // Both processes take requests (least-busy breaks ties round-robin).
    let pids: BTreeSet<i32> = (0..6).map(|_| pid_of(&get_report(&site, "/c/x"))).collect();
    assert_eq!(pids.len(), 2, "{pids:?}");
    let big = site.get("/c/big?big=300000");
    assert_eq!(big.status, 200);
    assert_eq!(big.body.len(), 300_000);
    assert!(big
        .body
        .iter()
        .enumerate()
        .all(|(i, &b)| b == b'a' + (i % 26) as u8));
}

#[test]
fn spec_2_2_a_perl_fcgi_module_application_spawned_by_stoa_answers_gets_and_posts() {
    require_perl_fcgi();
    let pools = format!(
        "[[pool]]\nname = \"perl\"\ncommand = [\"{PERL}\", \"{}\"]\nprocesses = 2\n",
        apps_dir().join("hello.pl").display()
    );
    let site = Site::start("fcgi-perl", &pools, &route("/pl/", "perl"));
    let rep = get_report(&site, "/pl/x?who=perl");
    assert_eq!(field(&rep, "lang"), "perl");
    assert_eq!(field(&rep, "method"), "GET");
    assert_eq!(field(&rep, "query"), "who=perl");
    let body = pattern(100_000, 5);
    for req in [post("/pl/p", &body), post_chunked("/pl/p", &body, 4096)] {
        let rep = ok_report(&site.request(&req));
        assert_eq!(field(&rep, "content_length"), "100000");
        assert_eq!(field(&rep, "body_len"), "100000");
        assert_eq!(field(&rep, "body_sum"), sum32(&body).to_string());
    }
    let st = site.wait_running("perl", 2);
    let pids: BTreeSet<i32> = (0..6)
        .map(|_| pid_of(&get_report(&site, "/pl/x")))
        .collect();
    assert_eq!(pids, st.pids().into_iter().collect(), "{st:?}");
}

#[test]
fn issue_4_php_fpm_as_an_external_pool_gets_script_filename_from_the_site_root() {
    let dir = TempDir::new("fcgi-fpm");
    dir.mkdir("www");
    populate_www(&dir);
    let fpm = PhpFpm::start(&dir);
    let pools = format!(
        "[[pool]]\nname = \"php\"\naddress = [\"unix:{}\"]\n",
        fpm.sock.display()
    );
    let routes = "[[site.route]]\nsuffix = \".php\"\nfastcgi = { pool = \"php\" }\n";
    let site = Site::start_in(dir, &pools, routes);
    let www = site.dir.join("www");

    let r = site.request(&request("GET", "/info.php?x=42", &["Cookie: SESSIONID=s1"]));
    let rep = ok_report(&r);
    assert_eq!(field(&rep, "sapi"), "fpm-fcgi");
    assert_eq!(field(&rep, "x"), "42");
    assert_eq!(field(&rep, "cookie"), "s1");
    assert_eq!(field(&rep, "script_name"), "/info.php");
    assert_eq!(field(&rep, "request_uri"), "/info.php?x=42");
    assert_eq!(
        field(&rep, "script_filename"),
        www.join("info.php").display().to_string()
    );
    assert!(r
        .header("content-type")
        .unwrap_or("")
        .starts_with("text/plain"));
    // The pid is one of php-fpm's workers, not Stoa's child.
    let pid = pid_of(&rep);
    assert!(
        live_children(fpm.pid()).contains(&pid),
        "pid {pid} is no php-fpm worker"
    );

    let body = pattern(200_000, 9);
    for req in [
        post("/info.php", &body),
        post_chunked("/info.php", &body, 8192),
    ] {
        let rep = ok_report(&site.request(&req));
        assert_eq!(field(&rep, "method"), "POST");
        assert_eq!(field(&rep, "content_length"), "200000");
        assert_eq!(field(&rep, "body_len"), "200000");
        assert_eq!(field(&rep, "body_crc32"), crc32_hex(&body));
    }
    let r = site.get("/info.php?code=418");
    assert_eq!(r.status, 418, "{r:?}");
    // php-fpm's own answer for a script that does not exist.
    let r = site.get("/missing.php");
    assert_eq!(r.status, 404, "{r:?}");
    // Static files still come from the root.
    let r = site.get("/static.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "hello static\n"));
}

#[test]
fn issue_4_php_fpm_with_4_workers_serves_8_concurrent_requests_without_stalling_behind_kept_alive_connections(
) {
    // php-fpm answers FCGI_GET_VALUES with FCGI_MPXS_CONNS only, and a
    // worker given FCGI_KEEP_CONN stays with its connection until it
    // closes: kept-alive connections idle in Stoa must not hold all four
    // workers while other requests wait in php-fpm's listen backlog (the
    // stall of nginx's fastcgi_keep_conn).
    let dir = TempDir::new("fcgi-fpm-stall");
    dir.mkdir("www");
    populate_www(&dir);
    let fpm = PhpFpm::start(&dir);
    let pools = format!(
        "[[pool]]\nname = \"php\"\naddress = [\"unix:{}\"]\ntimeout = \"20s\"\n",
        fpm.sock.display()
    );
    let routes = "[[site.route]]\nsuffix = \".php\"\nfastcgi = { pool = \"php\" }\n";
    let site = Site::start_in(dir, &pools, routes);
    for round in 0..2 {
        let t0 = Instant::now();
        let rs = parallel(if round == 0 { 4 } else { 8 }, |i| {
            let mut c = site.connect();
            c.stream
                .set_read_timeout(Some(Duration::from_secs(8)))
                .expect("timeout");
            c.send(&get(&format!("/info.php?sleep=300&i={i}")));
            let r = c
                .try_read_final()
                .map(|r| (r.status, pid_of(&report(&r.body))));
            (t0.elapsed(), r)
        });
        let bad: Vec<_> = rs
            .iter()
            .filter(|(t, r)| !matches!(r, Ok((200, _))) || *t > Duration::from_secs(3))
            .collect();
        assert!(
            bad.is_empty(),
            "round {round}: requests stalled or failed (php-fpm has 4 workers, each \
             kept by a connection idle in Stoa's stash): {bad:?}; all: {rs:?}; {:?}",
            site.status("php").line
        );
        if round == 1 {
            let pids: BTreeSet<i32> = rs
                .iter()
                .filter_map(|(_, r)| r.as_ref().ok())
                .map(|r| r.1)
                .collect();
            assert!(pids.len() >= 2, "{pids:?}");
        }
    }
    // No limits stated: one connection per request, none left open.
    let until = Instant::now() + Duration::from_secs(2);
    while connections_to(&fpm.sock) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        connections_to(&fpm.sock),
        0,
        "connections left open to php-fpm"
    );
}

/// Connections established to a listening Unix socket at `path`: the
/// accepted ends, as /proc/net/unix lists them (state 03, connected).
fn connections_to(path: &std::path::Path) -> usize {
    let table = std::fs::read_to_string("/proc/net/unix").expect("read /proc/net/unix");
    let p = path.display().to_string();
    table
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 8 && f[5] == "03" && f[7] == p
        })
        .count()
}

#[test]
fn issue_4_a_stated_capacity_keeps_php_fpm_connections_alive_without_ever_stalling_it() {
    // php-fpm states no limits in FCGI_GET_VALUES, so by default each
    // request gets its own connection. `capacity = 4` (its
    // pm.max_children) lets Stoa keep connections alive: never more than 4
    // open (in use plus idle), so no request waits behind an idle one.
    let dir = TempDir::new("fcgi-fpm-capacity");
    dir.mkdir("www");
    populate_www(&dir);
    let fpm = PhpFpm::start(&dir);
    let pools = format!(
        "[[pool]]\nname = \"php\"\naddress = [\"unix:{}\"]\ncapacity = 4\ntimeout = \"20s\"\n",
        fpm.sock.display()
    );
    let routes = "[[site.route]]\nsuffix = \".php\"\nfastcgi = { pool = \"php\" }\n";
    let site = Site::start_in(dir, &pools, routes);
    for round in 0..3 {
        let t0 = Instant::now();
        let rs = parallel(8, |i| {
            let mut c = site.connect();
            c.stream
                .set_read_timeout(Some(Duration::from_secs(8)))
                .expect("timeout");
            c.send(&get(&format!("/info.php?sleep=200&i={i}")));
            c.try_read_final().map(|r| r.status)
        });
        let took = t0.elapsed();
        assert!(
            rs.iter().all(|r| matches!(r, Ok(200))),
            "round {round}: {rs:?}; {:?}",
            site.status("php").line
        );
        // 8 requests of 200 ms on 4 workers: two waves, not a stall.
        assert!(took < Duration::from_secs(3), "round {round} took {took:?}");
        let open = connections_to(&fpm.sock);
        assert!(
            (1..=4).contains(&open),
            "round {round}: {open} connections open to php-fpm (kept alive: 1 to 4)"
        );
    }
    let st = site.status("php");
    assert_eq!(st.proc(0).capacity, 4, "{st:?}");
}

#[test]
fn issue_4_php_cgi_spawned_by_stoa_finds_its_listening_socket_on_fd_0() {
    require_php_cgi();
    let pools = format!(
        "[[pool]]\nname = \"phpcgi\"\ncommand = [\"{PHP_CGI}\"]\nprocesses = 2\n\
         env = {{ PHP_FCGI_CHILDREN = \"0\", PHP_FCGI_MAX_REQUESTS = \"1000\" }}\n"
    );
    let routes = "[[site.route]]\nsuffix = \".php\"\nfastcgi = { pool = \"phpcgi\" }\n";
    let site = Site::start("fcgi-phpcgi", &pools, routes);
    let st = site.wait_running("phpcgi", 2);
    let rep = get_report(&site, "/info.php?x=cgi");
    assert_eq!(field(&rep, "sapi"), "cgi-fcgi");
    assert_eq!(field(&rep, "x"), "cgi");
    assert_eq!(
        field(&rep, "script_filename"),
        site.dir.join("www/info.php").display().to_string()
    );
    // PHP_FCGI_CHILDREN=0: the spawned process itself answers.
    assert!(st.pids().contains(&pid_of(&rep)), "{rep:?} {st:?}");
    let body = pattern(50_000, 1);
    let rep = ok_report(&site.request(&post("/info.php", &body)));
    assert_eq!(field(&rep, "body_len"), "50000");
    assert_eq!(field(&rep, "body_crc32"), crc32_hex(&body));
    // The process stays up and serves again: a persistent application.
    let pids: BTreeSet<i32> = (0..6)
        .map(|_| pid_of(&get_report(&site, "/info.php")))
        .collect();
    assert_eq!(pids, st.pids().into_iter().collect());
}

#[test]
fn issue_4_stoas_own_rust_application_library_gets_the_cgi_meta_variables_and_its_stderr_is_logged()
{
    let site = hello_site("fcgi-rust", "processes = 1");
    let r = site.request(&request(
        "GET",
        "/app/some/path?params=1&x=1",
        &["X-Custom: v1", "Cookie: a=b"],
    ));
    assert_eq!(r.status, 200, "{r:?}");
    let text = r.text();
    let params: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("param "))
        .filter_map(|l| l.split_once('='))
        .collect();
    assert_eq!(params["REQUEST_METHOD"], "GET");
    assert_eq!(params["QUERY_STRING"], "params=1&x=1");
    assert_eq!(params["SCRIPT_NAME"], "/app/some/path");
    assert_eq!(params["REQUEST_URI"], "/app/some/path?params=1&x=1");
    assert_eq!(params["GATEWAY_INTERFACE"], "CGI/1.1");
    assert_eq!(params["SERVER_PROTOCOL"], "HTTP/1.1");
    assert_eq!(params["HTTP_X_CUSTOM"], "v1");
    assert_eq!(params["HTTP_COOKIE"], "a=b");
    assert_eq!(params["REMOTE_ADDR"], "127.0.0.1");
    assert_eq!(
        params["SCRIPT_FILENAME"],
        site.dir.join("www/app/some/path").display().to_string()
    );
    assert!(!params.contains_key("CONTENT_LENGTH"), "{params:?}");
    assert_eq!(r.header("x-pid"), Some(params_pid(&text).as_str()));

    // Status and a local redirect through the shared CGI head parser.
    assert_eq!(site.get("/app/?status=201").status, 201);
    let r = site.get("/app/?location=/static.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "hello static\n"));

    // FCGI_STDERR goes to the error log.
    let from = site.stderr().len();
    assert_eq!(site.get("/app/?log=marker-from-the-app-7731").status, 200);
    assert!(
        site.wait_stderr(from, "marker-from-the-app-7731", Duration::from_secs(3)),
        "stderr:\n{}",
        site.stderr()
    );
}

fn params_pid(text: &str) -> String {
    report(text.as_bytes())["pid"].clone()
}

// ---------------------------------------------------------------------------
// Connections and capacity

#[test]
fn spec_3_5_connections_to_a_process_are_kept_alive_with_fcgi_keep_conn() {
    let site = hello_site("fcgi-keep", "processes = 1");
    let mut c = site.connect();
    let mut last = BTreeMap::new();
    for i in 0..10 {
        last = ok_report(&c.request(&get(&format!("/app/?i={i}"))));
        assert_eq!(field(&last, "keep_conn"), "1");
    }
    // Ten requests on fresh client connections too, landing on both
    // workers (the stash is shared). The client connections stay open, so
    // that none goes away before its request has ended.
    let mut open = Vec::new();
    for i in 0..10 {
        let mut c = site.connect();
        last = ok_report(&c.request(&get(&format!("/app/?j={i}"))));
        open.push(c);
    }
    assert_eq!(field(&last, "served"), "19");
    assert_eq!(
        field(&last, "conns"),
        "1",
        "every request should reuse the one kept-alive connection: {last:?}"
    );
}

#[test]
fn spec_3_5_a_client_that_leaves_once_its_response_is_complete_costs_neither_the_kept_alive_connection_nor_the_request_count(
) {
    // The application sends its whole response, then FCGI_END_REQUEST 300
    // ms later; the client reads the response and closes at once. The
    // request did complete: the connection should go back to the stash and
    // the request count toward max_requests.
    let site = hello_site("fcgi-leave", "processes = 1\nmax_requests = 3");
    let first = pid_of(&get_report(&site, "/app/?warm"));
    let mut reps = Vec::new();
    for i in 0..2 {
        let mut c = site.connect();
        reps.push(ok_report(
            &c.request(&get(&format!("/app/?linger=300&i={i}"))),
        ));
        drop(c);
        std::thread::sleep(Duration::from_millis(500));
    }
    // Three requests so far: max_requests = 3 recycles the process now.
    let next = pid_of(&get_report(&site, "/app/?after"));
    assert_ne!(
        next, first,
        "the process served 4 requests with max_requests = 3: requests whose client left \
         before FCGI_END_REQUEST were not counted; reports {reps:?}"
    );
    assert_eq!(
        field(&reps[1], "conns"),
        "1",
        "the kept-alive connection was closed because the client left after a complete \
         response: {reps:?}"
    );
}

#[test]
fn spec_4_1_a_single_threaded_application_gets_one_request_at_a_time_and_requests_do_not_stall() {
    let site = hello_site("fcgi-single", "processes = 2");
    get_report(&site, "/app/?warm");
    let st = site.wait_running("app", 2);
    // FCGI_MAX_CONNS=1 was learnt: capacity 1 per process.
    let st2 = site.status("app");
    assert!(
        st2.procs.iter().all(|p| p.capacity == 1),
        "{st:?} / {st2:?}"
    );
    // Two slow requests at once: one per process, side by side, none
    // queued behind the other's kept-alive connection.
    let t0 = Instant::now();
    let reps = parallel(2, |_| {
        ok_report(&try_request(&site, &get("/app/?sleep=1000")).expect("request"))
    });
    let took = t0.elapsed();
    assert!(took < Duration::from_millis(1800), "took {took:?}");
    let pids: BTreeSet<i32> = reps.iter().map(pid_of).collect();
    assert_eq!(pids.len(), 2, "{reps:?}");
    for r in &reps {
        assert_eq!(field(r, "peak"), "1", "one request at a time: {r:?}");
    }
}

#[test]
fn spec_4_1_a_process_gets_at_most_fcgi_max_reqs_requests_even_when_fcgi_max_conns_is_higher() {
    // The application accepts 8 connections but runs 2 requests at once
    // (it refuses a third with a 503): Stoa must queue the rest.
    let site = Site::start(
        "fcgi-maxreqs",
        &hello_pool_args(
            "app",
            &["--no-mpx", "--max-conns", "8", "--max-reqs", "2"],
            "processes = 1",
        ),
        &route("/app/", "app"),
    );
    get_report(&site, "/app/?warm");
    let rs = parallel(6, |_| try_request(&site, &get("/app/?sleep=400")));
    let statuses: Vec<u16> = rs
        .iter()
        .map(|r| r.as_ref().map_or(0, |r| r.status))
        .collect();
    assert!(
        statuses.iter().all(|&s| s == 200),
        "FCGI_MAX_REQS=2 < FCGI_MAX_CONNS=8: Stoa should send at most 2 requests at once \
         and queue the others, got {statuses:?}; status: {:?}",
        site.status("app").line
    );
}

// ---------------------------------------------------------------------------
// Affinity

#[test]
fn issue_4_affinity_cookie_sends_a_session_to_the_same_process_and_spreads_sessions() {
    let site = hello_site(
        "fcgi-affinity",
        "processes = 2\naffinity = \"cookie:SESSIONID\"",
    );
    let st = site.wait_running("app", 2);
    let procs: BTreeSet<i32> = st.pids().into_iter().collect();
    let with_cookie = |c: &str| {
        request(
            "GET",
            "/app/",
            &[&format!("Cookie: theme=dark; SESSIONID={c}; lang=en")],
        )
    };
    // The same session, 30 times, over fresh and kept-alive connections.
    let mut pids = BTreeSet::new();
    let mut conn = site.connect();
    for i in 0..30 {
        let r = if i % 2 == 0 {
            site.request(&with_cookie("alice-42"))
        } else {
            conn.request(&with_cookie("alice-42"))
        };
        pids.insert(pid_of(&ok_report(&r)));
    }
    assert_eq!(
        pids.len(),
        1,
        "one session went to several processes: {pids:?}"
    );
    // 40 sessions spread over both processes.
    let mut by_pid: HashMap<i32, usize> = HashMap::new();
    let mut of_session = HashMap::new();
    for s in 0..40 {
        let pid = pid_of(&ok_report(&site.request(&with_cookie(&format!("user{s}")))));
        *by_pid.entry(pid).or_default() += 1;
        of_session.insert(s, pid);
    }
    assert_eq!(
        by_pid.keys().copied().collect::<BTreeSet<_>>(),
        procs,
        "{by_pid:?}"
    );
    assert!(by_pid.values().all(|&n| n >= 5), "uneven spread {by_pid:?}");
    // And each of them is sticky.
    for s in 0..40 {
        let pid = pid_of(&ok_report(&site.request(&with_cookie(&format!("user{s}")))));
        assert_eq!(pid, of_session[&s], "session user{s} moved");
    }
}

/// A session the application starts (its `Set-Cookie: SID=...`) stays
/// with the process that started it and knows it, wherever rendezvous
/// hashing would have sent that value (issue 12's fix, shared by FastCGI
/// pools): without it about half of new sessions moved on their second
/// request.
#[test]
fn issue_12_a_session_cookie_an_application_sets_brings_its_requests_back_to_it() {
    let site = hello_site("fcgi-learn", "processes = 2\naffinity = \"cookie:SID\"");
    site.wait_running("app", 2);
    let mut moved = Vec::new();
    for s in 0..16 {
        let first = ok_report(&site.request(&get(&format!("/app/?setcookie=new{s}"))));
        let again =
            ok_report(&site.request(&request("GET", "/app/", &[&format!("Cookie: SID=new{s}")])));
        if pid_of(&first) != pid_of(&again) {
            moved.push(s);
        }
    }
    assert!(moved.is_empty(), "sessions that moved: {moved:?}");
}

#[test]
fn issue_4_affinity_by_query_parameter_and_by_header_is_sticky_too() {
    let pools = format!(
        "{}{}",
        hello_pool("q", "processes = 3\naffinity = \"query:user\""),
        hello_pool("h", "processes = 3\naffinity = \"header:X-User\"")
    );
    let routes = format!("{}{}", route("/q/", "q"), route("/h/", "h"));
    let site = Site::start("fcgi-affinity2", &pools, &routes);
    site.wait_running("q", 3);
    site.wait_running("h", 3);
    for user in ["ann", "bob", "cy", "dee"] {
        let q: BTreeSet<i32> = (0..8)
            .map(|i| pid_of(&get_report(&site, &format!("/q/?i={i}&user={user}"))))
            .collect();
        assert_eq!(q.len(), 1, "query user={user}: {q:?}");
        let h: BTreeSet<i32> = (0..8)
            .map(|_| {
                pid_of(&ok_report(&site.request(&request(
                    "GET",
                    "/h/",
                    &[&format!("X-User: {user}")],
                ))))
            })
            .collect();
        assert_eq!(h.len(), 1, "header X-User: {user}: {h:?}");
    }
    // Without the key, requests are balanced over the processes.
    let pids: BTreeSet<i32> = (0..9).map(|_| pid_of(&get_report(&site, "/q/"))).collect();
    assert_eq!(pids.len(), 3, "{pids:?}");
}

// ---------------------------------------------------------------------------
// Crashes, recycling, growth

#[test]
fn issue_4_kill_9_of_a_process_under_load_fails_no_request_and_the_pool_recovers() {
    let site = hello_site("fcgi-kill9", "processes = 2");
    get_report(&site, "/app/?warm");
    let before = site.wait_running("app", 2);
    let victim = before.proc(0).pid;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let t0 = Instant::now();
    let (results, killed_at) = std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        let load: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let r = try_request(&site, &get("/app/?sleep=100"));
                        out.push((t0.elapsed(), r.map(|r| (r.status, r.body))));
                    }
                    out
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(700));
        let killed_at = t0.elapsed();
        kill(victim, libc::SIGKILL);
        std::thread::sleep(Duration::from_millis(2000));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let results: Vec<_> = load
            .into_iter()
            .flat_map(|h| h.join().expect("load thread"))
            .collect();
        (results, killed_at)
    });
    let failed: Vec<_> = results
        .iter()
        .filter(|(_, r)| !matches!(r, Ok((200, _))))
        .map(|(t, r)| (t, r.as_ref().map(|(s, _)| *s)))
        .collect();
    // The GET in flight on the killed process went to the other one
    // (nginx's `fastcgi_next_upstream error`): nothing failed.
    assert!(
        failed.is_empty(),
        "killed at {killed_at:?}, failures {failed:?}"
    );
    let after_kill = results.iter().filter(|(t, _)| *t > killed_at).count();
    assert!(
        after_kill >= 8,
        "the load stopped: {after_kill} requests after the kill"
    );
    // The slot restarted with a new process; everything succeeds again.
    let st = site.wait_status("app", Duration::from_secs(5), |s| {
        s.proc(0).restarts == 1 && s.proc(0).pid > 0 && s.proc(0).state == "Running"
    });
    assert_ne!(st.proc(0).pid, victim);
    assert_eq!(
        st.proc(1).pid,
        before.proc(1).pid,
        "the other process was untouched"
    );
    assert_eq!(st.proc(1).restarts, 0);
    let pids: BTreeSet<i32> = (0..20)
        .map(|_| pid_of(&get_report(&site, "/app/")))
        .collect();
    assert_eq!(pids, st.pids().into_iter().collect());
    assert!(!alive(victim));
}

/// The only process of a spawned pool is killed (SIGKILL: the OOM killer)
/// under GET load: the requests it had in flight go again once its
/// successor runs (the slot's listening socket outlives it, so nothing
/// queued there is lost), and no client sees a failure. nginx with one
/// `server` in its upstream answers 502 to those in flight; php-fpm's
/// master restarts the child the same way.
#[test]
fn a_killed_single_spawned_process_under_get_load_costs_no_request() {
    let site = hello_site("fcgi-kill-one", "processes = 1");
    get_report(&site, "/app/?warm");
    let victim = site.wait_running("app", 1).proc(0).pid;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let t0 = Instant::now();
    let (results, killed_at) = std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        let load: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let r = try_request(&site, &get("/app/?sleep=20"));
                        out.push((t0.elapsed(), r.map(|r| r.status)));
                    }
                    out
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let killed_at = t0.elapsed();
        kill(victim, libc::SIGKILL);
        // Until the successor has served a while.
        site.wait_status("app", Duration::from_secs(5), |s| {
            s.proc(0).restarts == 1 && s.proc(0).state == "Running"
        });
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let results: Vec<_> = load
            .into_iter()
            .flat_map(|h| h.join().expect("load thread"))
            .collect();
        (results, killed_at)
    });
    let failed: Vec<_> = results
        .iter()
        .filter(|(_, r)| !matches!(r, Ok(200)))
        .collect();
    assert!(
        failed.is_empty(),
        "killed at {killed_at:?}, failures {failed:?}\n{}",
        site.stderr()
    );
    let after = results.iter().filter(|(t, _)| *t > killed_at).count();
    assert!(
        after >= 8,
        "the load stopped: {after} requests after the kill"
    );
    assert!(!alive(victim));
}

/// nginx's `fastcgi_next_upstream error timeout` (its default): a GET
/// that got no response head in time goes to the pool's other process
/// (the first is told to stop it, FastCGI §5.4); with `retries = { on =
/// ["error"] }` (nginx: `fastcgi_next_upstream error`) the client gets its
/// 504 after the first timeout.
#[test]
fn a_get_that_times_out_goes_to_the_other_process_unless_the_route_retries_only_on_error() {
    let pool = hello_pool("app", "processes = 2\ntimeout = \"500ms\"");
    let routes = "[[site.route]]\nprefix = \"/app/\"\nfastcgi = { pool = \"app\" }\n\n\
                  [[site.route]]\nprefix = \"/once/\"\nfastcgi = { pool = \"app\", retries = { on = [\"error\"] } }\n\n";
    let site = Site::start("fcgi-timeout-retry", &pool, routes);
    site.wait_running("app", 2);
    let t = Instant::now();
    let r = site.get("/app/?sleep=1500");
    let both = t.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    assert!(
        site.wait_stderr(0, "retrying on another process", Duration::from_secs(5)),
        "{}",
        site.stderr()
    );
    assert!(both >= Duration::from_millis(1000), "504 after {both:?}");
    let t = Instant::now();
    let r = site.get("/once/?sleep=1500");
    let once = t.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    assert!(once < Duration::from_millis(900), "504 after {once:?}");
    // The line is written before the 504; stderr comes through a pipe.
    site.wait_stderr(0, "504 (GET not sent again)", Duration::from_secs(5));
    let log = site.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("504 (GET not sent again)"))
        .unwrap_or_else(|| panic!("no log line for the 504:\n{log}"));
    assert!(line.contains("fastcgi pool app"), "{line}");
    assert!(line.contains("GET /once/"), "{line}");
    assert!(line.contains("client: 127.0.0.1"), "{line}");
}

#[test]
fn issue_10_a_process_killed_after_serving_is_restarted_at_once_every_time() {
    let site = hello_site("fcgi-kill-again", "processes = 1");
    let mut pid = site.wait_running("app", 1).proc(0).pid;
    for round in 1..=5 {
        // A healthy process: it served, and lived past its start-up.
        assert_eq!(pid_of(&get_report(&site, "/app/")), pid);
        std::thread::sleep(Duration::from_millis(1100));
        // The OOM killer, or an operator.
        kill(pid, libc::SIGKILL);
        let t = Instant::now();
        let next = loop {
            if let Some(&p) = live_children(site.pid()).iter().find(|&&p| p != pid) {
                break p;
            }
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "kill {round}: no new process\n{}",
                site.stderr()
            );
            std::thread::sleep(Duration::from_millis(2));
        };
        let took = t.elapsed();
        assert!(
            took < Duration::from_millis(300),
            "kill {round}: the new process came after {took:?} (php-fpm: ~10 ms)"
        );
        pid = next;
    }
    assert_eq!(pid_of(&get_report(&site, "/app/")), pid);
    assert!(
        !site.stderr().contains("crash-looping"),
        "a process that served is not crash-looping: {}",
        site.stderr()
    );
}

#[test]
fn issue_10_an_absolute_form_authority_replaces_host_for_the_application_rfc9112_3_2_2() {
    let site = hello_site("fcgi-absolute", "processes = 1");
    let r = site.request(
        b"GET http://evil.example:81/app/x?params=1 HTTP/1.1\r\nHost: good.example\r\n\r\n",
    );
    assert_eq!(r.status, 200, "{r:?}");
    let text = r.text();
    for want in [
        "param SERVER_NAME=evil.example\n",
        "param HTTP_HOST=evil.example:81\n",
        "param REQUEST_URI=/app/x?params=1\n",
    ] {
        assert!(text.contains(want), "no {want:?} in {text}");
    }
    assert!(!text.contains("good.example"), "{text}");
}

#[test]
fn issue_4_a_process_that_dies_mid_request_gives_502_for_that_request_only() {
    let site = hello_site("fcgi-die", "processes = 1");
    let first = pid_of(&get_report(&site, "/app/"));
    // A POST: not retried, though it went out on a kept-alive connection
    // (a GET would be sent once more, see the keep-alive race tests).
    let r = site.request(&post("/app/?exit=3", b"x"));
    assert_eq!(r.status, 502, "{r:?}");
    let st = site.wait_status("app", Duration::from_secs(5), |s| {
        s.proc(0).restarts == 1 && s.proc(0).pid > 0 && s.proc(0).state == "Running"
    });
    let second = pid_of(&get_report(&site, "/app/"));
    assert_ne!(first, second);
    assert_eq!(second, st.proc(0).pid);
    assert!(
        site.wait_stderr(0, "exited", Duration::from_secs(10)),
        "the exit is logged: {}",
        site.stderr()
    );
    // Once the response has started, the death cuts the connection: the
    // client must not take a truncated body for a whole one.
    let mut c = site.connect();
    c.send(&get("/app/?exit=4&partial=1"));
    match c.try_read(false) {
        Ok(r) => panic!("a truncated response looked complete: {r:?}"),
        Err(e) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
            ),
            "{e}"
        ),
    }
    assert!(pid_of(&get_report(&site, "/app/")) > 0);
}

#[test]
fn issue_4_max_requests_recycles_processes_gracefully_without_failing_a_request() {
    let site = hello_site("fcgi-recycle", "processes = 2\nmax_requests = 5");
    let first = site.wait_running("app", 2);
    let mut per_pid: HashMap<i32, usize> = HashMap::new();
    let mut c = site.connect();
    for i in 0..12 {
        let r = c.request(&get(&format!("/app/?i={i}")));
        let rep = ok_report(&r);
        *per_pid.entry(pid_of(&rep)).or_default() += 1;
    }
    assert!(
        per_pid.values().all(|&n| n <= 5),
        "a process served more than max_requests: {per_pid:?}"
    );
    assert!(per_pid.len() >= 3, "{per_pid:?}");
    // Both slots were recycled: each ran at least two processes.
    let st = site.wait_status("app", Duration::from_secs(5), |s| {
        s.procs.iter().filter(|p| p.pid > 0).count() == 2
    });
    for slot in 0..2 {
        assert_ne!(
            st.proc(slot).pid,
            first.proc(slot).pid,
            "slot #{slot} was never recycled: {st:?}; served {per_pid:?}"
        );
        assert!(
            site.stderr()
                .contains(&format!("recycled process #{slot} after 5 requests")),
            "{}",
            site.stderr()
        );
        assert_eq!(st.proc(slot).restarts, 0, "a recycle is no crash");
    }
    // The recycled processes were stopped, not left behind.
    let old: Vec<i32> = first.pids();
    assert!(wait_gone(&old, Duration::from_secs(5)).is_ok());
}

#[test]
fn issue_4_a_dynamic_pool_grows_while_requests_queue_and_shrinks_when_idle() {
    let site = hello_site(
        "fcgi-dynamic",
        "min_processes = 1\nmax_processes = 3\nidle_timeout = \"1s\"",
    );
    site.wait_running("app", 1);
    get_report(&site, "/app/?warm");
    // (A request that waited for the first process to start may have grown
    // the pool already; it shrinks back after idle_timeout.)
    site.wait_status("app", Duration::from_secs(5), |s| s.pids().len() == 1);
    let t0 = Instant::now();
    let reps = parallel(6, |_| {
        ok_report(&try_request(&site, &get("/app/?sleep=1000")).expect("request"))
    });
    let took = t0.elapsed();
    let pids: BTreeSet<i32> = reps.iter().map(pid_of).collect();
    assert_eq!(pids.len(), 3, "the pool should grow to 3: {pids:?}");
    assert!(took < Duration::from_millis(4500), "took {took:?}");
    assert!(site.wait_stderr(0, "waiting, starting process", Duration::from_secs(10)));
    // Idle for idle_timeout: back to min_processes.
    let st = site.wait_status("app", Duration::from_secs(8), |s| s.pids().len() == 1);
    let gone: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|p| !st.pids().contains(p))
        .collect();
    assert_eq!(gone.len(), 2, "{st:?}");
    assert!(wait_gone(&gone, Duration::from_secs(5)).is_ok());
    assert!(site.wait_stderr(0, "idle, stopping it", Duration::from_secs(10)));
    get_report(&site, "/app/");
}

// ---------------------------------------------------------------------------
// Queue and timeouts

#[test]
fn issue_4_a_full_queue_answers_503_at_once_and_a_queue_timeout_503_with_retry_after() {
    let site = hello_site(
        "fcgi-queue",
        "processes = 1\nqueue = 1\nqueue_timeout = \"1s\"",
    );
    get_report(&site, "/app/?warm");
    let t0 = Instant::now();
    let rs = parallel(3, |i| {
        std::thread::sleep(Duration::from_millis(250 * i as u64));
        let r = try_request(&site, &get("/app/?sleep=2500"));
        (
            t0.elapsed(),
            r.map(|r| (r.status, r.header("retry-after").map(str::to_owned))),
        )
    });
    // The first is served, the second waits its queue_timeout, the third
    // finds the queue full.
    let (t, r) = &rs[0];
    assert_eq!(r.as_ref().map(|r| r.0), Ok(200), "{rs:?}");
    assert!(*t >= Duration::from_millis(2400), "{rs:?}");
    let (t, r) = &rs[1];
    assert_eq!(r.clone(), Ok((503, Some("1".to_owned()))), "{rs:?}");
    assert!(
        *t >= Duration::from_millis(1150) && *t < Duration::from_millis(2200),
        "queue_timeout 1s: {rs:?}"
    );
    let (t, r) = &rs[2];
    assert_eq!(r.clone(), Ok((503, Some("1".to_owned()))), "{rs:?}");
    assert!(
        *t < Duration::from_millis(900),
        "queue full: at once: {rs:?}"
    );
}

#[test]
fn issue_4_an_application_silent_past_the_timeout_gets_504() {
    let site = hello_site("fcgi-504", "processes = 1\ntimeout = \"1s\"");
    get_report(&site, "/app/?warm");
    let t0 = Instant::now();
    let r = site.get("/app/?sleep=2000");
    let took = t0.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(2000),
        "took {took:?}"
    );
    // Once the application is done with it, the process serves again.
    std::thread::sleep(Duration::from_millis(2300).saturating_sub(t0.elapsed()));
    let r = site.get("/app/?after");
    assert_eq!(r.status, 200, "{r:?}");
}

// ---------------------------------------------------------------------------
// Aborts

#[test]
fn spec_5_4_a_client_that_goes_away_while_the_application_is_silent_aborts_its_request() {
    let site = hello_site("fcgi-abort-silent", "processes = 1");
    get_report(&site, "/app/?warm");
    let from = site.stderr().len();
    {
        let mut c = site.connect();
        c.send(&get("/app/?sleep=4000&abort-me"));
        std::thread::sleep(Duration::from_millis(300));
    } // closed
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let r = try_request(&site, &get("/app/?next"));
    let took = t0.elapsed();
    assert_eq!(r.as_ref().map(|r| r.status), Ok(200), "{r:?}");
    assert!(
        took < Duration::from_millis(1500),
        "the next request waited {took:?} for a request whose client had gone: Stoa should \
         see the client close and send FCGI_ABORT_REQUEST (spec 5.4) so the single-threaded \
         application stops it; stderr:\n{}",
        &site.stderr()[from..]
    );
    assert!(
        site.stderr()[from..].contains("abort-me) aborted after"),
        "the application never saw FCGI_ABORT_REQUEST; stderr:\n{}",
        &site.stderr()[from..]
    );
}

#[test]
fn spec_5_4_a_client_that_goes_away_mid_response_frees_the_process_at_once() {
    let site = hello_site("fcgi-abort-stream", "processes = 1");
    get_report(&site, "/app/?warm");
    let from = site.stderr().len();
    {
        let mut c = site.connect();
        c.send(&get("/app/?drip=200&every=20"));
        let head = c.try_read(true).expect("response head");
        assert_eq!(head.status, 200);
        let mut buf = [0u8; 2048];
        let _ = c.stream.read(&mut buf);
        std::thread::sleep(Duration::from_millis(300));
    } // closed with data unread: a reset
    let t0 = Instant::now();
    let r = try_request(&site, &get("/app/?next"));
    let took = t0.elapsed();
    assert_eq!(r.as_ref().map(|r| r.status), Ok(200), "{r:?}");
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert!(
        site.wait_stderr(from, "stoa-hello-fcgi[", Duration::from_secs(2)),
        "the application never noticed; stderr:\n{}",
        &site.stderr()[from..]
    );
}

// ---------------------------------------------------------------------------
// Bodies

#[test]
fn spec_5_3_post_bodies_of_0_1_and_10_mb_arrive_intact_with_an_exact_content_length() {
    let site = hello_site("fcgi-bodies", "processes = 1");
    let ten_mb = pattern(10 << 20, 11);
    for len in [0usize, 1, 10 << 20] {
        let body = &ten_mb[..len];
        for (how, req) in [
            ("Content-Length", post("/app/", body)),
            ("chunked", post_chunked("/app/", body, 65_000)),
        ] {
            let mut c = site.connect();
            c.stream
                .set_read_timeout(Some(Duration::from_secs(20)))
                .expect("timeout");
            let rep = ok_report(&c.request(&req));
            assert_eq!(field(&rep, "method"), "POST", "{how}");
            assert_eq!(field(&rep, "body_len"), len.to_string(), "{how}");
            assert_eq!(field(&rep, "body_fnv"), fnv_hex(body), "{how} {len}");
            let cl = field(&rep, "content_length");
            if len == 0 {
                assert!(cl == "0" || cl == "-", "{how}: CONTENT_LENGTH {cl:?}");
            } else {
                assert_eq!(cl, len.to_string(), "{how}: CONTENT_LENGTH");
            }
        }
    }
    // A request without a body has no CONTENT_LENGTH.
    let rep = get_report(&site, "/app/");
    assert_eq!(field(&rep, "content_length"), "-");
}

#[test]
fn spec_5_3_chunked_uploads_reach_a_multiplexing_application_intact_without_being_held_whole_in_memory(
) {
    // A chunked body is spooled (memory, then a file) so CONTENT_LENGTH is
    // exact; from the file it goes to the application a piece at a time,
    // so three 12 MB uploads at once cost Stoa far less than 36 MB.
    const LEN: usize = 12 << 20;
    let site = Site::start(
        "fcgi-spool",
        &hello_pool_args("app", &["--mpx"], "processes = 1"),
        &route("/app/", "app"),
    );
    get_report(&site, "/app/?warm");
    let base = rss_kib(site.pid());
    let body = pattern(LEN, 5);
    let done = std::sync::atomic::AtomicBool::new(false);
    let (reps, max_rss) = std::thread::scope(|s| {
        let _stop = StopOnDrop(&done);
        let sampler = s.spawn(|| {
            let mut max = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                max = max.max(rss_kib(site.pid()));
                std::thread::sleep(Duration::from_millis(5));
            }
            max
        });
        let reps = parallel(3, |i| {
            let mut c = site.connect();
            c.stream
                .set_read_timeout(Some(Duration::from_secs(30)))
                .expect("timeout");
            let r = c.request(&post_chunked(&format!("/app/?i={i}"), &body, 64 * 1024));
            ok_report(&r)
        });
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (reps, sampler.join().expect("sampler"))
    });
    for rep in &reps {
        assert_eq!(field(rep, "content_length"), LEN.to_string());
        assert_eq!(field(rep, "body_len"), LEN.to_string());
        assert_eq!(field(rep, "body_fnv"), fnv_hex(&body));
    }
    eprintln!(
        "3 x 12 MB chunked uploads: server RSS {base} KiB before, at most {max_rss} KiB during"
    );
    assert!(
        max_rss < base + 24 * 1024,
        "server RSS reached {max_rss} KiB (was {base} KiB): the uploads were held in memory"
    );
}

#[test]
fn issue_4_a_50_mb_response_to_a_slow_client_arrives_intact_with_bounded_server_memory() {
    const LEN: usize = 50 << 20;
    let site = hello_site("fcgi-big", "processes = 1");
    get_report(&site, "/app/?warm");
    let base = rss_kib(site.pid());
    let mut c = site.connect();
    c.set_recv_buffer(64 * 1024);
    c.send(&get(&format!("/app/?big={LEN}&seed=7")));
    let head = c.try_read(true).expect("head");
    assert_eq!(head.status, 200, "{head:?}");
    assert_eq!(head.content_length(), Some(LEN as u64));
    // Stall, then read slowly.
    std::thread::sleep(Duration::from_millis(1500));
    let (body, max_rss) = read_body_slowly(
        &mut c,
        LEN,
        site.pid(),
        256 * 1024,
        16,
        Duration::from_millis(40),
        Instant::now() + Duration::from_secs(40),
    );
    eprintln!("50 MB to a slow client: server RSS {base} KiB before, at most {max_rss} KiB during");
    assert!(body == pattern(LEN, 7), "the 50 MB body arrived damaged");
    assert!(
        max_rss < 64 * 1024,
        "server RSS reached {max_rss} KiB (was {base} KiB before)"
    );
}

// ---------------------------------------------------------------------------
// Multiplexing

#[test]
fn spec_3_3_a_multiplexing_application_gets_many_concurrent_requests() {
    let site = Site::start(
        "fcgi-mpx",
        &hello_pool_args("app", &["--mpx"], "processes = 1"),
        &route("/app/", "app"),
    );
    get_report(&site, "/app/?warm");
    let st = site.status("app");
    assert_eq!(
        st.proc(0).capacity,
        50,
        "capacity from FCGI_MAX_CONNS: {st:?}"
    );
    let t0 = Instant::now();
    let reps = parallel(40, |i| {
        let r = try_request(&site, &get(&format!("/app/?sleep=600&n={i}"))).expect("request");
        ok_report(&r)
    });
    let took = t0.elapsed();
    for (i, r) in reps.iter().enumerate() {
        assert_eq!(field(r, "query"), format!("sleep=600&n={i}"));
    }
    let pids: BTreeSet<i32> = reps.iter().map(pid_of).collect();
    assert_eq!(pids.len(), 1);
    let peak = reps
        .iter()
        .map(|r| field(r, "peak").parse::<usize>().expect("peak"))
        .max()
        .unwrap_or(0);
    assert!(peak >= 20, "at most {peak} requests ran at once");
    assert!(took < Duration::from_secs(4), "40 x 600 ms took {took:?}");
}

/// Found by the lab (issue 15): an id freed by its END_REQUEST can be given
/// to the next request on the connection while the first request has not
/// yet taken its last records. Two workers, each multiplexing onto the one
/// process, kept-alive clients back to back: every request gets its own
/// answer (none lost, none given another's), FastCGI §3.3 and §5.5.
#[test]
fn spec_3_3_every_request_multiplexed_by_two_workers_gets_its_own_answer_when_ids_are_reused() {
    let site = Site::start(
        "fcgi-mpx-reuse",
        &hello_pool_args("app", &["--mpx"], "processes = 1"),
        &route("/app/", "app"),
    );
    get_report(&site, "/app/?warm");
    assert_eq!(site.status("app").proc(0).capacity, 50, "not multiplexing");
    let addr = site.addr;
    let runs = parallel(8, |c| {
        let mut conn = Conn::connect(addr);
        let mut bad = Vec::new();
        let mut top_id = 0u16;
        for j in 0..300 {
            let q = format!("c={c}&j={j}");
            let r = match conn.try_send(&get(&format!("/app/?{q}"))) {
                Ok(()) => conn.try_read_final(),
                Err(e) => Err(e),
            };
            match r {
                Ok(r) if r.status == 200 && field(&report(&r.body), "query") == q => {
                    let id = field(&report(&r.body), "request_id").parse().unwrap_or(0);
                    top_id = top_id.max(id);
                }
                Ok(r) => bad.push(format!("{q}: {} {:?}", r.status, r.text())),
                Err(e) => {
                    bad.push(format!("{q}: {e}"));
                    conn = Conn::connect(addr);
                }
            }
        }
        (bad, top_id)
    });
    let top_id = runs.iter().map(|r| r.1).max().unwrap_or(0);
    assert!(
        top_id > 1,
        "requests never shared a connection (ids up to {top_id})"
    );
    let failures: Vec<String> = runs.into_iter().flat_map(|r| r.0).collect();
    assert!(
        failures.is_empty(),
        "{} of 2400 requests failed, first: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

#[test]
fn spec_3_3_the_rust_application_library_multiplexes_requests_over_one_connection() {
    let dir = TempDir::new("fcgi-mpx-direct");
    let app = App::spawn(&dir.join("app.sock"), HELLO, &["--mpx"]);
    let mut c = app.connect();
    let v = c.get_values();
    assert_eq!(
        (v.max_conns, v.max_reqs, v.mpxs_conns),
        (Some(50), Some(50), Some(true))
    );
    c.gw.set_max_concurrent(30);
    let t0 = Instant::now();
    let ids: Vec<u16> = (0..30)
        .map(|i| {
            let q = format!("sleep=500&n={i}");
            c.start(Role::Responder, &cgi_params("GET", &q), b"")
        })
        .collect();
    let distinct: BTreeSet<u16> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), 30);
    let mut peak = 0;
    for (i, id) in ids.iter().enumerate() {
        let a = c.wait(*id);
        assert_eq!(a.protocol_status, Some(ProtocolStatus::RequestComplete));
        let rep = report(&a.stdout);
        assert_eq!(field(&rep, "query"), format!("sleep=500&n={i}"));
        assert_eq!(field(&rep, "request_id"), id.to_string());
        peak = peak.max(field(&rep, "peak").parse::<usize>().expect("peak"));
    }
    assert!(peak >= 20, "peak {peak}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    // A second request on the connection of a non-multiplexing process is
    // refused with CANT_MPX_CONN (§5.5).
    let single = App::spawn(&dir.join("single.sock"), HELLO, &[]);
    let mut s = single.connect();
    let v = s.get_values();
    assert_eq!(
        (v.max_conns, v.max_reqs, v.mpxs_conns),
        (Some(1), Some(1), Some(false))
    );
    s.gw.set_max_concurrent(2);
    let a = s.start(Role::Responder, &cgi_params("GET", "sleep=300"), b"");
    let b = s.start(Role::Responder, &cgi_params("GET", "b"), b"");
    assert_eq!(s.wait(b).protocol_status, Some(ProtocolStatus::CantMpxConn));
    assert_eq!(
        s.wait(a).protocol_status,
        Some(ProtocolStatus::RequestComplete)
    );
}

#[test]
fn spec_6_3_the_rust_application_library_authorizer_answers_200_with_variables_or_403() {
    let dir = TempDir::new("fcgi-authz");
    let app = App::spawn(&dir.join("authz.sock"), HELLO, &["--authorizer"]);
    let mut c = app.connect();
    let mut params = cgi_params("GET", "");
    params.push(("HTTP_AUTHORIZATION", "Bearer good"));
    let id = c.start(Role::Authorizer, &params, b"");
    let a = c.wait(id);
    assert_eq!(a.protocol_status, Some(ProtocolStatus::RequestComplete));
    let out = String::from_utf8_lossy(&a.stdout).into_owned();
    assert!(out.starts_with("Status: 200\r\n"), "{out:?}");
    assert!(out.contains("Variable-USER: alice\r\n"), "{out:?}");
    for auth in [Some("Bearer bad"), None] {
        let mut params = cgi_params("GET", "");
        if let Some(v) = auth {
            params.push(("HTTP_AUTHORIZATION", v));
        }
        let id = c.start(Role::Authorizer, &params, b"");
        let out = String::from_utf8_lossy(&c.wait(id).stdout).into_owned();
        assert!(out.starts_with("Status: 403\r\n"), "{auth:?}: {out:?}");
        assert!(!out.contains("Variable-"), "{out:?}");
    }
    // It offers only the Authorizer role (§5.5: UNKNOWN_ROLE).
    let id = c.start(Role::Responder, &cgi_params("GET", ""), b"");
    assert_eq!(
        c.wait(id).protocol_status,
        Some(ProtocolStatus::UnknownRole)
    );
}

// ---------------------------------------------------------------------------
// Remote addresses

/// A TCP listener on 127.0.0.1 whose accept queue is full and never
/// drained: the kernel drops further SYNs, so a connect hangs. Returns the
/// port and what must stay open.
fn blackhole() -> (u16, Vec<std::net::TcpStream>, i32) {
    // SAFETY: plain socket calls on a descriptor this function owns; the
    // sockaddr is a zeroed, fully initialized sockaddr_in.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "socket");
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len),
            0
        );
        assert_eq!(libc::listen(fd, 0), 0);
        let mut got: libc::sockaddr_in = std::mem::zeroed();
        let mut glen = len;
        libc::getsockname(fd, &mut got as *mut _ as *mut libc::sockaddr, &mut glen);
        let port = u16::from_be(got.sin_port);
        // Fill the accept queue until a connect no longer completes.
        let mut held = Vec::new();
        for _ in 0..8 {
            match std::net::TcpStream::connect_timeout(
                &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
                Duration::from_millis(300),
            ) {
                Ok(c) => held.push(c),
                Err(_) => return (port, held, fd),
            }
        }
        panic!("the accept queue of a listen(0) socket never filled");
    }
}

#[test]
fn issue_4_an_address_that_never_answers_the_connect_gives_502_after_the_pool_timeout() {
    let (port, _held, fd) = blackhole();
    let pools =
        format!("[[pool]]\nname = \"ext\"\naddress = [\"127.0.0.1:{port}\"]\ntimeout = \"1s\"\n");
    let site = Site::start("fcgi-blackhole", &pools, &route("/ext/", "ext"));
    let t0 = Instant::now();
    let r = site.get("/ext/x");
    let took = t0.elapsed();
    assert_eq!(r.status, 502, "{:?}", String::from_utf8_lossy(&r.body));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(6),
        "answered after {took:?} (connect limit 1 s, two tries)"
    );
    // SAFETY: closes the listener blackhole() opened and nothing else uses.
    unsafe {
        libc::close(fd);
    }
}

#[test]
fn issue_4_a_request_refused_by_one_address_is_sent_to_another() {
    let dir = TempDir::new("fcgi-refused");
    dir.mkdir("www");
    let app = App::spawn(&dir.join("live.sock"), HELLO, &["--mpx"]);
    let pools = format!(
        "[[pool]]\nname = \"ext\"\naddress = [\"unix:{}\", \"unix:{}\"]\nbalance = \"round-robin\"\n",
        dir.join("nobody-listens.sock").display(),
        app.sock.display()
    );
    let site = Site::start_in(dir, &pools, &route("/ext/", "ext"));
    for i in 0..10 {
        let rep = get_report(&site, &format!("/ext/?i={i}"));
        assert_eq!(pid_of(&rep), app.pid());
    }
}

// ---------------------------------------------------------------------------
// Process hygiene

/// A site with the Rust application (2 processes), the C one, the Perl
/// one and php-cgi, all running.
fn zoo(tag: &str) -> (Site, Vec<i32>) {
    require_perl_fcgi();
    require_php_cgi();
    let c = c_app();
    let pools = format!(
        "{}[[pool]]\nname = \"c\"\ncommand = [\"{}\"]\n\n\
         [[pool]]\nname = \"perl\"\ncommand = [\"{PERL}\", \"{}\"]\n\n\
         [[pool]]\nname = \"php\"\ncommand = [\"{PHP_CGI}\"]\nenv = {{ PHP_FCGI_CHILDREN = \"2\" }}\n\n",
        hello_pool("app", "processes = 2"),
        c.display(),
        apps_dir().join("hello.pl").display()
    );
    let routes = format!(
        "{}{}{}[[site.route]]\nsuffix = \".php\"\nfastcgi = {{ pool = \"php\" }}\n",
        route("/app/", "app"),
        route("/c/", "c"),
        route("/pl/", "perl")
    );
    let site = Site::start(tag, &pools, &routes);
    let mut pids = Vec::new();
    for (pool, n, path) in [
        ("app", 2, "/app/"),
        ("c", 1, "/c/"),
        ("perl", 1, "/pl/"),
        ("php", 1, "/info.php"),
    ] {
        assert_eq!(site.get(path).status, 200, "{pool}");
        pids.extend(site.wait_running(pool, n).pids());
    }
    // php-cgi with PHP_FCGI_CHILDREN=2 forks workers of its own.
    assert!(
        pids.iter()
            .all(|&p| processes().iter().any(|&(q, ..)| q == p)),
        "{pids:?}"
    );
    (site, pids)
}

#[test]
fn issue_4_sigterm_of_stoa_stops_every_application_process() {
    let (mut site, pids) = zoo("fcgi-sigterm");
    let with_groups = survivors(&pids);
    assert!(
        with_groups.len() >= pids.len() + 2,
        "php-cgi's children: {with_groups:?}"
    );
    site.signal(libc::SIGTERM);
    let st = site.wait_exit(Duration::from_secs(10));
    assert!(
        st.is_some_and(|s| s.success()),
        "stoa did not exit cleanly: {st:?}"
    );
    if let Err(left) = wait_gone(&pids, Duration::from_secs(3)) {
        let names: Vec<String> = left
            .iter()
            .map(|&p| format!("{p} {}", cmdline(p)))
            .collect();
        panic!("processes left after SIGTERM: {names:?}");
    }
}

#[test]
fn issue_4_sigkill_of_stoa_leaves_no_orphaned_application_process_pr_set_pdeathsig() {
    let (mut site, pids) = zoo("fcgi-sigkill");
    site.signal_now(libc::SIGKILL);
    assert!(site.wait_exit(Duration::from_secs(5)).is_some());
    if let Err(left) = wait_gone(&pids, Duration::from_secs(5)) {
        let names: Vec<String> = left
            .iter()
            .map(|&p| format!("{p} {}", cmdline(p)))
            .collect();
        // Do not leave them behind for the next test run.
        for &p in &left {
            unsafe {
                libc::kill(p, libc::SIGKILL);
            }
        }
        panic!("orphans left after SIGKILL of stoa: {names:?}");
    }
    // A killed stoa cannot remove its socket directory: do it here.
    let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("stoa-{}", site.pid())));
}

#[test]
fn issue_4_sigterm_of_stoa_with_an_external_pool_exits_promptly() {
    // Nothing to stop for an `address` pool: shutdown should not wait on it.
    let dir = TempDir::new("fcgi-term-ext");
    dir.mkdir("www");
    let app = App::spawn(&dir.join("ext.sock"), HELLO, &["--mpx"]);
    let pools = format!(
        "[[pool]]\nname = \"ext\"\naddress = [\"unix:{}\"]\n",
        app.sock.display()
    );
    let mut site = Site::start_in(dir, &pools, &route("/ext/", "ext"));
    assert_eq!(pid_of(&get_report(&site, "/ext/")), app.pid());
    let from = site.stderr().len();
    let t0 = Instant::now();
    site.signal(libc::SIGTERM);
    let st = site.wait_exit(Duration::from_secs(8));
    let took = t0.elapsed();
    assert!(st.is_some_and(|s| s.success()), "{st:?}");
    assert!(
        took < Duration::from_secs(2),
        "an idle stoa with one address pool took {took:?} to stop; stderr:\n{}",
        &site.stderr()[from..]
    );
    // The external application is not Stoa's to stop.
    assert!(alive(app.pid()));
}

#[test]
fn issue_4_a_reload_that_removes_a_pool_stops_its_processes_and_keeps_the_others() {
    let pools_ab = format!(
        "{}{}",
        hello_pool("a", "processes = 1"),
        hello_pool("b", "processes = 2")
    );
    let routes_ab = format!("{}{}", route("/a/", "a"), route("/b/", "b"));
    let site = Site::start("fcgi-reload", &pools_ab, &routes_ab);
    let a = site.wait_running("a", 1).pids();
    let b = site.wait_running("b", 2).pids();
    assert!(pid_of(&get_report(&site, "/b/")) > 0);
    site.rewrite(&hello_pool("a", "processes = 1"), &route("/a/", "a"));
    let from = site.stderr().len();
    site.signal(libc::SIGHUP);
    assert!(
        site.wait_stderr(from, "reloaded", Duration::from_secs(5)),
        "{}",
        site.stderr()
    );
    if let Err(left) = wait_gone(&b, Duration::from_secs(6)) {
        panic!("pool b's processes outlived its removal: {left:?}");
    }
    assert!(site.stderr()[from..].contains("pool b: removed"));
    // Pool a kept its process.
    assert_eq!(pid_of(&get_report(&site, "/a/")), a[0]);
    assert_eq!(site.status("a").pids(), a);
    assert_eq!(site.get("/b/").status, 404);
    // A pool whose settings change is restarted.
    site.rewrite(&hello_pool("a", "processes = 2"), &route("/a/", "a"));
    let from = site.stderr().len();
    site.signal(libc::SIGHUP);
    assert!(site.wait_stderr(from, "reloaded", Duration::from_secs(5)));
    assert!(wait_gone(&a, Duration::from_secs(6)).is_ok());
    let st = site.wait_running("a", 2);
    assert!(!st.pids().contains(&a[0]));
}

// ---------------------------------------------------------------------------
// Start-up failures

#[test]
fn issue_4_a_command_that_cannot_start_gives_503_and_a_clear_error_while_other_routes_work() {
    let pools = format!(
        "[[pool]]\nname = \"broken\"\ncommand = [\"/nonexistent/stoa-test-app\"]\n\
         queue_timeout = \"1s\"\n\n{}",
        hello_pool("ok", "processes = 1")
    );
    let routes = format!("{}{}", route("/broken/", "broken"), route("/ok/", "ok"));
    let site = Site::start("fcgi-nostart", &pools, &routes);
    let t0 = Instant::now();
    let r = site.get("/broken/");
    assert!(matches!(r.status, 502 | 503), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    let err = site.stderr();
    assert!(
        err.contains("cannot start") && err.contains("/nonexistent/stoa-test-app"),
        "{err}"
    );
    assert!(pid_of(&get_report(&site, "/ok/")) > 0);
    assert_eq!(site.get("/static.txt").status, 200);
}

#[test]
fn issue_4_a_command_that_exits_at_once_is_reported_as_crash_looping() {
    let pools = format!(
        "[[pool]]\nname = \"crashy\"\ncommand = [\"/bin/sh\", \"-c\", \"exit 3\"]\n\
         queue_timeout = \"1s\"\n\n{}",
        hello_pool("ok", "processes = 1")
    );
    let routes = format!("{}{}", route("/crashy/", "crashy"), route("/ok/", "ok"));
    let site = Site::start("fcgi-crashloop", &pools, &routes);
    assert!(
        site.wait_stderr(0, "crash-looping", Duration::from_secs(8)),
        "{}",
        site.stderr()
    );
    assert!(site.wait_stderr(0, "pool crashy", Duration::from_secs(10)));
    let r = site.get("/crashy/");
    assert!(matches!(r.status, 502 | 503), "{r:?}");
    let st = site.status("crashy");
    assert!(st.proc(0).restarts >= 4, "{st:?}");
    assert!(pid_of(&get_report(&site, "/ok/")) > 0);
}

/// A directory under Cargo's temporary directory for integration tests
/// (inside the workspace, so a relative path to it from the test's working
/// directory has `..` that do not stop at `/`); removed on drop.
struct WorkspaceTmp(std::path::PathBuf);

impl Drop for WorkspaceTmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `path` relative to `base` (both absolute).
fn relative(path: &std::path::Path, base: &std::path::Path) -> std::path::PathBuf {
    let p: Vec<_> = path.components().collect();
    let b: Vec<_> = base.components().collect();
    let common = p.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut r = std::path::PathBuf::new();
    for _ in common..b.len() {
        r.push("..");
    }
    for c in &p[common..] {
        r.push(c);
    }
    r
}

#[test]
fn issue_4_a_relative_command_resolves_against_the_config_files_directory_with_a_relative_config() {
    let tmp = WorkspaceTmp(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("fcgi-relcfg-{}", std::process::id())),
    );
    let dir = &tmp.0;
    std::fs::create_dir_all(dir.join("www")).expect("mkdir");
    std::fs::create_dir_all(dir.join("bin")).expect("mkdir");
    let script = dir.join("bin/app.sh");
    std::fs::write(&script, format!("#!/bin/sh\nexec {HELLO} \"$@\"\n")).expect("write");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let cfg = dir.join("stoa.toml");
    std::fs::write(
        &cfg,
        site_config(
            "[[pool]]\nname = \"rel\"\ncommand = [\"./bin/app.sh\"]\nqueue_timeout = \"1s\"\n",
            &route("/rel/", "rel"),
        ),
    )
    .expect("write config");
    // `stoa serve --config RELATIVE/stoa.toml`, relative to the working
    // directory it inherits from the test.
    let cwd = std::env::current_dir().expect("cwd");
    let rel = relative(&cfg.canonicalize().expect("canonical"), &cwd);
    assert!(rel.is_relative() && rel.exists(), "{}", rel.display());
    let server = Server::spawn([
        std::ffi::OsStr::new("serve"),
        std::ffi::OsStr::new("--config"),
        rel.as_os_str(),
    ]);
    let mut server = server;
    let r = server.get("/rel/?x=1");
    assert_eq!(
        r.status,
        200,
        "command [\"./bin/app.sh\"] with --config {}: {r:?}\nstderr:\n{}",
        rel.display(),
        server.stderr()
    );
    // A clean stop, so that stoa removes its socket directory.
    server.signal(libc::SIGTERM);
    assert!(server.wait_exit(Duration::from_secs(5)).is_some());
}

// ---------------------------------------------------------------------------
// Status page

fn status_route(extra: &str) -> String {
    format!("[[site.route]]\nprefix = \"/stoa-status\"\nstatus = {{ {extra} }}\n\n")
}

#[test]
fn issue_4_the_status_page_shows_pools_processes_and_responses_as_text_json_and_prometheus() {
    let routes = format!("{}{}", route("/app/", "app"), status_route(""));
    let site = Site::start("fcgi-status", &hello_pool("app", "processes = 2"), &routes);
    let st = site.wait_running("app", 2);
    for i in 0..5 {
        get_report(&site, &format!("/app/?i={i}"));
    }
    assert_eq!(site.get("/no-such-file").status, 404);

    let text = site.get("/stoa-status");
    assert_eq!(text.status, 200);
    assert_eq!(
        text.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let body = String::from_utf8_lossy(&text.body).to_string();
    assert!(body.contains("pool app (spawned): waiting 0"), "{body}");
    for pid in st.pids() {
        assert!(body.contains(&format!(" running pid {pid} ")), "{body}");
    }
    assert!(body.contains("workers: 2"), "{body}");

    // A request's process is busy until its END_REQUEST record is read,
    // which may come after the client has its whole response: the count
    // of requests served is read once no process is busy any more.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (json, v) = loop {
        let json = site.get("/stoa-status?format=json");
        let v: serde_json::Value = serde_json::from_slice(&json.body).expect("valid JSON");
        let idle = v["pools"][0]["processes"]
            .as_array()
            .is_some_and(|ps| ps.iter().all(|p| p["busy"] == 0));
        if idle {
            break (json, v);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a process stays busy: {v}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(json.header("content-type"), Some("application/json"));
    assert!(v["responses"]["2xx"].as_u64().unwrap_or(0) >= 6, "{v}");
    assert!(v["responses"]["4xx"].as_u64().unwrap_or(0) >= 1, "{v}");
    let procs = v["pools"][0]["processes"].as_array().expect("processes");
    assert_eq!(procs.len(), 2, "{v}");
    let served: u64 = procs
        .iter()
        .map(|p| p["served"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(served, 5, "{v}");
    assert!(
        procs
            .iter()
            .all(|p| p["state"] == "running" && p["capacity"] == 1),
        "{v}"
    );

    let prom = site.get("/stoa-status?format=prometheus");
    let body = String::from_utf8_lossy(&prom.body).to_string();
    assert!(
        body.contains("# TYPE stoa_responses_total counter"),
        "{body}"
    );
    assert!(
        body.contains("stoa_pool_process_up{pool=\"app\",process=\"0\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("stoa_pool_process_up{pool=\"app\",process=\"1\"} 1"),
        "{body}"
    );
    assert!(body.contains("stoa_pool_waiting{pool=\"app\"} 0"), "{body}");
    let total_2xx: u64 = body
        .lines()
        .find_map(|l| l.strip_prefix("stoa_responses_total{class=\"2xx\"} "))
        .and_then(|n| n.parse().ok())
        .expect("2xx counter");
    assert!(total_2xx >= 7, "{body}");
}

#[test]
fn issue_4_the_status_page_answers_only_the_addresses_it_allows() {
    let routes = format!(
        "{}{}",
        route("/app/", "app"),
        status_route("allow = [\"10.0.0.0/8\"]")
    );
    let site = Site::start("fcgi-status-deny", &hello_pool("app", ""), &routes);
    assert_eq!(site.get("/stoa-status").status, 403);
    assert_eq!(site.get("/stoa-status?format=json").status, 403);
}

// ---------------------------------------------------------------------------
// Kept-alive connections: parked only when clean, retried, expired (issues 9
// and 10)

/// A php-fpm external pool with `capacity = 4` and `extra` pool keys, in
/// front of a php-fpm started with `fpm_extra` settings.
fn fpm_site(tag: &str, fpm_extra: &str, extra: &str) -> (Site, PhpFpm) {
    let dir = TempDir::new(tag);
    dir.mkdir("www");
    populate_www(&dir);
    let fpm = PhpFpm::start_with(&dir, fpm_extra);
    let pools = format!(
        "[[pool]]\nname = \"php\"\naddress = [\"unix:{}\"]\ncapacity = 4\ntimeout = \"10s\"\n{extra}\n",
        fpm.sock.display()
    );
    let routes = "[[site.route]]\nsuffix = \".php\"\nfastcgi = { pool = \"php\" }\n";
    (Site::start_in(dir, &pools, routes), fpm)
}

/// Issue 9 item 4: a parked connection pins a php-fpm child. After a burst,
/// Stoa keeps connections only `keepalive_timeout`, so php-fpm's other
/// clients get its children back while Stoa is idle.
#[test]
fn issue_9_parked_php_fpm_connections_close_after_keepalive_timeout() {
    let (site, fpm) = fpm_site("fcgi-fpm-ka", "", "keepalive_timeout = \"500ms\"");
    let rs = parallel(4, |i| {
        try_request(&site, &get(&format!("/info.php?sleep=100&i={i}"))).map(|r| r.status)
    });
    assert!(rs.iter().all(|r| matches!(r, Ok(200))), "{rs:?}");
    let parked = connections_to(&fpm.sock);
    assert!(parked >= 1, "nothing was kept alive after the burst");
    let until = Instant::now() + Duration::from_secs(3);
    while connections_to(&fpm.sock) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        connections_to(&fpm.sock),
        0,
        "connections still parked 3 s after a 500 ms keepalive_timeout"
    );
    // And the next request opens a new one as usual.
    assert_eq!(site.get("/info.php").status, 200);
}

/// Issue 10 item 2: an application that answers a POST without reading its
/// body (FastCGI §5.3 lets it) may drop the connection with stdin unread.
/// Such a connection is never parked, so other clients' requests to the
/// same pool never meet it: no 502 for anyone.
#[test]
fn issue_10_an_application_that_ignores_its_post_body_costs_no_other_request_a_502() {
    let app = c_app();
    let dir = TempDir::new("fcgi-noread");
    dir.mkdir("www");
    std::fs::copy(&app, dir.join("hello_fcgi")).expect("copy the C application");
    let site = Site::start_in(
        dir,
        "[[pool]]\nname = \"c\"\ncommand = [\"./hello_fcgi\"]\nprocesses = 2\n",
        &route("/c/", "c"),
    );
    site.wait_running("c", 2);
    let body = pattern(300_000, 5);
    let statuses = parallel(6, |t| {
        (0..15)
            .map(|i| {
                let req = if t % 2 == 0 {
                    post(&format!("/c/?noread=1&t={t}&i={i}"), &body)
                } else {
                    get(&format!("/c/?t={t}&i={i}"))
                };
                try_request(&site, &req).map_or(0, |r| r.status)
            })
            .collect::<Vec<u16>>()
    })
    .concat();
    assert!(
        statuses.iter().all(|&s| s == 200),
        "{statuses:?}\n{}",
        site.server.stderr()
    );
}

/// Issue 9 (FastCGI §4.1): a multiplexing application that says
/// FCGI_MAX_CONNS=8, FCGI_MAX_REQS=64 takes up to 64 requests at once over
/// at most 8 connections, not min(8, 64).
#[test]
fn spec_4_1_a_multiplexing_application_gets_max_reqs_requests_over_at_most_max_conns_connections() {
    let site = Site::start(
        "fcgi-mpx-reqs",
        &hello_pool_args(
            "app",
            &["--mpx", "--max-conns", "8", "--max-reqs", "64"],
            "processes = 1",
        ),
        &route("/app/", "app"),
    );
    get_report(&site, "/app/?warm");
    let reps = parallel(16, |_| try_request(&site, &get("/app/?sleep=600")));
    let mut peak = 0;
    let mut conns = 0;
    for r in &reps {
        let r = r.as_ref().expect("a response");
        let rep = ok_report(r);
        peak = peak.max(field(&rep, "peak").parse::<usize>().expect("peak"));
        conns = conns.max(field(&rep, "conns").parse::<usize>().expect("conns"));
    }
    assert!(
        peak > 8,
        "at most {peak} requests ran at once: capacity was min(MAX_CONNS, MAX_REQS); {:?}",
        site.status("app").line
    );
    assert!(conns <= 8, "{conns} connections opened (FCGI_MAX_CONNS=8)");
    assert_eq!(site.status("app").proc(0).capacity, 64);
}

/// Opens `n` connections that send a POST head announcing a 100 kB body
/// to `path`, and only a few bytes of it.
fn crawling_posts(site: &Site, path: &str, n: usize) -> Vec<Conn> {
    (0..n)
        .map(|_| {
            let mut c = site.connect();
            c.send(
                format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\nslow")
                    .as_bytes(),
            );
            c
        })
        .collect()
}

/// Issue 10 item 1, against real applications: ten slow uploads to a
/// libfcgi C application (a pool of two single-threaded processes) and to
/// php-fpm (four children) take none of their processes, because Stoa
/// reads a body before it takes one; everyone else is served meanwhile.
#[test]
fn issue_10_ten_slow_uploads_take_no_process_of_a_libfcgi_pool_or_of_php_fpm() {
    let app = c_app();
    let dir = TempDir::new("fcgi-slow-posts");
    dir.mkdir("www");
    populate_www(&dir);
    std::fs::copy(&app, dir.join("hello_fcgi")).expect("copy the C application");
    let fpm = PhpFpm::start(&dir);
    let pools = format!(
        "[[pool]]\nname = \"c\"\ncommand = [\"./hello_fcgi\"]\nprocesses = 2\nqueue_timeout = \"2s\"\n\n\
         [[pool]]\nname = \"php\"\naddress = [\"unix:{}\"]\ncapacity = 4\nqueue_timeout = \"2s\"\n",
        fpm.sock.display()
    );
    let routes = format!(
        "{}[[site.route]]\nsuffix = \".php\"\nfastcgi = {{ pool = \"php\" }}\n",
        route("/c/", "c")
    );
    let site = Site::start_in(dir, &pools, &routes);
    site.wait_running("c", 2);
    let _c = crawling_posts(&site, "/c/upload", 10);
    let _php = crawling_posts(&site, "/info.php", 10);
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    for i in 0..10 {
        let r = site.get(&format!("/c/?i={i}"));
        assert_eq!(r.status, 200, "C app GET {i} beside 10 slow uploads: {r:?}");
        let r = site.get(&format!("/info.php?i={i}"));
        assert_eq!(
            r.status, 200,
            "php-fpm GET {i} beside 10 slow uploads: {r:?}"
        );
    }
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "20 GETs took {:?}",
        t0.elapsed()
    );
}

/// Issue 10 (found by bench/reliability.sh): after kill -9 of a
/// single-threaded application process, no request waits for a parked
/// connection to expire. A request sent again after its connection died
/// used to open a new connection past a parked one, which held the new
/// process while the new connection waited in its backlog until
/// `keepalive_timeout` closed the parked one (stalls of ~2 s).
#[test]
fn issue_10_after_kill_9_of_a_single_threaded_process_no_request_stalls_behind_a_parked_connection()
{
    let app = c_app();
    let dir = TempDir::new("fcgi-kill9-stall");
    dir.mkdir("www");
    std::fs::copy(&app, dir.join("hello_fcgi")).expect("copy the C application");
    let site = Site::start_in(
        dir,
        "[[pool]]\nname = \"c\"\ncommand = [\"./hello_fcgi\"]\nprocesses = 1\nkeepalive_timeout = \"3s\"\n",
        &route("/c/", "c"),
    );
    site.wait_running("c", 1);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let worst = std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        let load: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut worst = Duration::ZERO;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let t = Instant::now();
                        let _ = try_request(&site, &get("/c/?sleep=5"));
                        worst = worst.max(t.elapsed());
                    }
                    worst
                })
            })
            .collect();
        for _ in 0..4 {
            std::thread::sleep(Duration::from_millis(500));
            let pid = site.wait_running("c", 1).proc(0).pid;
            kill(pid, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(800));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        load.into_iter()
            .map(|h| h.join().expect("load thread"))
            .max()
            .unwrap_or_default()
    });
    assert!(
        worst < Duration::from_millis(1500),
        "a request took {worst:?} across four kill -9 (keepalive_timeout 3 s)\n{}",
        site.server.stderr()
    );
}
