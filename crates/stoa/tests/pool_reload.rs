//! Application pools across reloads and process deaths, as nginx's master
//! and php-fpm behave: a reload that changes a spawned pool starts a new
//! generation of processes on sockets of its own while the old one drains
//! (nginx's old workers finish their requests after a SIGHUP; nothing is
//! refused), connections opened before the reload use the new pool on
//! their next request, an unchanged pool keeps its processes, and a GET
//! whose process is killed before answering goes to another process
//! (`fastcgi_next_upstream error`, nginx's default), so php-fpm's killed
//! children cost no request, and neither do Stoa's.
//!
//! The pool is `stoa-hello-fcgi` (Stoa's own application library); the
//! load is the project's own generator, `stoa bench -k`.

mod common;
mod fastcgi_support;

use common::*;
use fastcgi_support::*;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(10);

/// The status page's route.
const STATUS: &str = "[[site.route]]\nprefix = \"/stoa-status\"\nstatus = {}\n\n";

/// Pool `app` of `stoa-hello-fcgi` with `processes` and GREETING in its
/// environment.
fn app_pool(processes: usize, greeting: &str) -> String {
    hello_pool(
        "app",
        &format!("processes = {processes}\nenv = {{ GREETING = \"{greeting}\" }}"),
    )
}

fn routes() -> String {
    format!("{}{STATUS}", route("/app/", "app"))
}

/// Sends SIGHUP and waits for the server to say it reloaded.
fn reload(s: &Server) {
    let mark = s.stderr().len();
    s.signal(libc::SIGHUP);
    assert!(
        s.wait_stderr(mark, "reloaded", WAIT),
        "no reload message:\n{}",
        s.stderr()
    );
    assert!(
        !s.stderr()[mark..].contains("reload failed"),
        "{}",
        s.stderr()
    );
}

/// The GREETING the application that answered on `c` has.
fn greeting(r: &Response) -> String {
    assert_eq!(r.status, 200, "{r:?}");
    field(&ok_report(r), "env").to_owned()
}

/// The status page as JSON.
fn status(s: &Server) -> serde_json::Value {
    let r = s.get("/stoa-status?format=json");
    assert_eq!(r.status, 200, "{r:?}");
    serde_json::from_slice(&r.body).expect("status JSON")
}

/// Pool `name`'s processes on the status page.
fn procs(s: &Server, name: &str) -> Vec<serde_json::Value> {
    let st = status(s);
    st["pools"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name))
        .and_then(|p| p["processes"].as_array().cloned())
        .unwrap_or_else(|| panic!("no pool {name} on the status page: {st}"))
}

/// Waits until pool `name` has exactly `n` running processes with a pid;
/// returns their pids by slot.
fn wait_running(s: &Server, name: &str, n: usize) -> Vec<i32> {
    let until = Instant::now() + WAIT;
    loop {
        let ps = procs(s, name);
        let pids: Vec<i32> = ps
            .iter()
            .filter(|p| p["state"] == "running")
            .filter_map(|p| p["pid"].as_i64())
            .filter(|&p| p > 0)
            .map(|p| p as i32)
            .collect();
        if pids.len() == n && ps.len() == n {
            return pids;
        }
        assert!(
            Instant::now() < until,
            "pool {name} never had {n} running processes: {ps:?}\n{}",
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Requests pool `name` has served, all processes together.
fn served(s: &Server, name: &str) -> u64 {
    procs(s, name)
        .iter()
        .filter_map(|p| p["served"].as_u64())
        .sum()
}

/// The server's private directory for its pools' sockets.
fn rundir(s: &Server) -> PathBuf {
    std::env::temp_dir().join(format!("stoa-{}", s.pid()))
}

fn sockets(s: &Server) -> BTreeSet<String> {
    std::fs::read_dir(rundir(s))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until the run directory holds exactly `n` entries, none of them
/// in `old`.
fn wait_sockets(s: &Server, n: usize, old: &BTreeSet<String>) -> BTreeSet<String> {
    let until = Instant::now() + WAIT;
    loop {
        let now = sockets(s);
        if now.len() == n && now.is_disjoint(old) {
            return now;
        }
        assert!(
            Instant::now() < until,
            "run directory {}: {now:?} (old generation: {old:?})\n{}",
            rundir(s).display(),
            s.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// nginx keeps serving through `nginx -s reload` with its old workers
/// finishing what they have; php-fpm's reload, the same. A SIGHUP that
/// changes a spawned pool's `env` under keep-alive load from `stoa bench
/// -k` (8 clients on a pool of 2, so most requests wait in its queue when
/// the reload comes) fails none of them; the application then has the new
/// environment, the old processes are gone and their sockets with them.
#[test]
fn a_reload_that_changes_a_spawned_pools_env_under_keep_alive_load_fails_no_request() {
    let site = Site::start("pool-env-load", &app_pool(2, "one"), &routes());
    assert_eq!(greeting(&site.get("/app/?env=GREETING")), "one");
    let old_pids = wait_running(&site, "app", 2);
    let old_sockets = sockets(&site);
    assert_eq!(old_sockets.len(), 2, "{old_sockets:?}");

    let json = site.dir.join("bench.json");
    let url = format!("http://{}/app/?env=GREETING&sleep=2", site.addr);
    let total = 3000;
    let mut bench = Command::new(stoa_bin())
        .args([
            "bench",
            "-k",
            "-c",
            "8",
            "-n",
            &total.to_string(),
            "-l",
            "-q",
        ])
        .arg("--json")
        .arg(&json)
        .arg(&url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start stoa bench");
    // The load is under way: the pool has served some of it.
    let until = Instant::now() + Duration::from_secs(60);
    while served(&site, "app") < 200 {
        assert!(Instant::now() < until, "the load never got going");
        std::thread::sleep(Duration::from_millis(20));
    }
    site.rewrite(&app_pool(2, "two"), &routes());
    reload(&site);
    assert!(
        bench.try_wait().expect("bench").is_none(),
        "the load ended before the reload; nothing was tested"
    );
    assert_eq!(greeting(&site.get("/app/?env=GREETING")), "two");

    let until = Instant::now() + Duration::from_secs(120);
    let st = loop {
        if let Some(st) = bench.try_wait().expect("bench") {
            break st;
        }
        if Instant::now() > until {
            let _ = bench.kill();
            panic!("stoa bench did not finish\n{}", site.stderr());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(st.success(), "stoa bench: {st}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("bench report")).expect("JSON");
    assert_eq!(report["successful"], total, "{report:#}\n{}", site.stderr());
    assert_eq!(report["failed"], 0, "{report:#}");
    assert_eq!(report["non_2xx"], 0, "{report:#}");

    // Nothing of the old generation is left: processes, sockets.
    wait_sockets(&site, 2, &old_sockets);
    wait_gone(&old_pids, WAIT).unwrap_or_else(|p| panic!("old processes still run: {p:?}"));
    let new_pids = wait_running(&site, "app", 2);
    assert!(new_pids.iter().all(|p| !old_pids.contains(p)));
}

/// A pool grown and shrunk by two reloads (2, 3, then 2 processes) keeps
/// serving every request, with as many processes as the configuration
/// says, each generation on sockets of its own (the old pool's cleanup
/// once deleted the new pool's sockets: every later request got 502).
#[test]
fn a_pool_of_2_then_3_then_2_processes_across_two_reloads_keeps_serving() {
    let site = Site::start("pool-2-3-2", &app_pool(2, "x"), &routes());
    let mut pids = wait_running(&site, "app", 2);
    let mut old_sockets = sockets(&site);
    for n in [3, 2] {
        site.rewrite(&app_pool(n, "x"), &routes());
        reload(&site);
        let now_sockets = wait_sockets(&site, n, &old_sockets);
        wait_gone(&pids, WAIT).unwrap_or_else(|p| panic!("old processes still run: {p:?}"));
        let now = wait_running(&site, "app", n);
        // 2n requests at once, each holding its process 300 ms: every
        // process of the new generation answers some.
        let answered: BTreeSet<i32> = parallel(2 * n, |i| {
            let r = site.get(&format!("/app/?sleep=300&i={i}"));
            assert_eq!(r.status, 200, "{r:?}\n{}", site.stderr());
            pid_of(&ok_report(&r))
        })
        .into_iter()
        .collect();
        assert_eq!(answered, now.iter().copied().collect(), "{n} processes");
        for _ in 0..10 {
            assert_eq!(site.get("/app/").status, 200, "{}", site.stderr());
        }
        pids = now;
        old_sockets = now_sockets;
    }
    assert!(!site.stderr().contains("No such file"), "{}", site.stderr());
}

/// nginx closes an old worker's idle keep-alive connections on reload, so
/// a client's next request reaches a new worker with the new
/// configuration. Stoa keeps the connection, and its next request uses the
/// new runtime: the new pool answers at once, not after `queue_timeout`
/// (10 s) waiting on the stopped one.
#[test]
fn a_keep_alive_connection_opened_before_a_reload_is_served_by_the_new_pool_at_once() {
    let site = Site::start("pool-keepalive", &app_pool(1, "one"), &routes());
    let mut c = site.connect();
    assert_eq!(greeting(&c.request(&get("/app/?env=GREETING"))), "one");
    site.rewrite(&app_pool(1, "two"), &routes());
    reload(&site);
    let t = Instant::now();
    let r = c.request(&get("/app/?env=GREETING"));
    let took = t.elapsed();
    assert_eq!(greeting(&r), "two", "{}", site.stderr());
    assert!(
        took < Duration::from_secs(3),
        "the request took {took:?} (queue_timeout is 10 s)"
    );
    // And again: the same connection stays on the new pool.
    assert_eq!(greeting(&c.request(&get("/app/?env=GREETING"))), "two");
}

/// A reload that changes one pool leaves the other as it was (as php-fpm
/// keeps a pool whose section did not change): the same processes, its
/// requests counted on.
#[test]
fn a_reload_keeps_an_unchanged_pool_with_its_processes_and_counters() {
    let pools = |greeting: &str| format!("{}{}", hello_pool("keep", ""), app_pool(1, greeting));
    let routes = format!("{}{}", route("/keep/", "keep"), routes());
    let site = Site::start("pool-keep", &pools("one"), &routes);
    for _ in 0..3 {
        assert_eq!(site.get("/keep/").status, 200);
    }
    let kept = wait_running(&site, "keep", 1);
    let until = Instant::now() + WAIT;
    while served(&site, "keep") < 3 {
        assert!(Instant::now() < until, "3 requests never counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    let changed = wait_running(&site, "app", 1);
    site.rewrite(&pools("two"), &routes);
    reload(&site);
    assert_eq!(greeting(&site.get("/app/?env=GREETING")), "two");
    assert_eq!(wait_running(&site, "keep", 1), kept);
    assert_ne!(wait_running(&site, "app", 1), changed);
    assert!(served(&site, "keep") >= 3, "the counters were reset");
    assert_eq!(site.get("/keep/").status, 200);
}

/// php-fpm's children killed by SIGKILL cost nginx no request: a GET whose
/// upstream connection breaks before the response head goes to the next
/// server (`fastcgi_next_upstream error`). A spawned process killed while
/// it serves a GET: that GET goes to the pool's other process, and both
/// clients get 200 from it. Twice: with the processes warmed up (kept-alive
/// connections) and with a freshly restarted one (whose first request also
/// asked FCGI_GET_VALUES, so it had said something before it died).
#[test]
fn a_spawned_process_killed_while_gets_are_in_flight_fails_none_of_them() {
    let site = Site::start("pool-kill", &hello_pool("app", "processes = 2"), &routes());
    wait_running(&site, "app", 2);
    // Warm both processes (least-busy gives each one of two at once).
    parallel(2, |i| {
        assert_eq!(site.get(&format!("/app/?sleep=100&w={i}")).status, 200);
    });
    for round in 0..2 {
        let pids = wait_running(&site, "app", 2);
        let server: &Server = &site;
        let answers = std::thread::scope(|s| {
            let gets: Vec<_> = (0..2)
                .map(|i| s.spawn(move || server.get(&format!("/app/?sleep=1500&r={round}&i={i}"))))
                .collect();
            // Both processes busy with one GET each.
            let until = Instant::now() + WAIT;
            loop {
                let ps = procs(&site, "app");
                if ps.iter().filter(|p| p["busy"] == 1).count() == 2 {
                    break;
                }
                assert!(Instant::now() < until, "never both busy: {ps:?}");
                std::thread::sleep(Duration::from_millis(10));
            }
            kill(pids[0], libc::SIGKILL);
            gets.into_iter()
                .map(|g| g.join().expect("request thread"))
                .collect::<Vec<_>>()
        });
        for r in &answers {
            assert_eq!(r.status, 200, "round {round}: {r:?}\n{}", site.stderr());
            assert_eq!(
                pid_of(&ok_report(r)),
                pids[1],
                "round {round}: not answered by the other process"
            );
        }
        assert!(!alive(pids[0]));
    }
    assert!(
        site.wait_stderr(0, "retrying on another process", Duration::from_secs(10)),
        "{}",
        site.stderr()
    );
}

/// The same with a multiplexing application (FCGI_MPXS_CONNS=1, every
/// request of a worker on one connection): the process's death loses
/// every request on that connection at once, and each GET goes to the
/// other process.
#[test]
fn a_multiplexing_process_killed_with_gets_in_flight_fails_none_of_them() {
    let site = Site::start(
        "pool-kill-mpx",
        &hello_pool_args("app", &["--mpx"], "processes = 2"),
        &routes(),
    );
    let pids = wait_running(&site, "app", 2);
    // Each process learns to multiplex from its first answer.
    let until = Instant::now() + WAIT;
    while procs(&site, "app")
        .iter()
        .any(|p| p["multiplexing"] != true)
    {
        parallel(4, |i| {
            assert_eq!(site.get(&format!("/app/?sleep=50&w={i}")).status, 200);
        });
        assert!(Instant::now() < until, "never multiplexing");
    }
    let server: &Server = &site;
    let answers = std::thread::scope(|s| {
        let gets: Vec<_> = (0..6)
            .map(|i| s.spawn(move || server.get(&format!("/app/?sleep=1500&i={i}"))))
            .collect();
        // Requests in flight on both processes.
        let until = Instant::now() + WAIT;
        loop {
            let ps = procs(server, "app");
            let busy: Vec<u64> = ps.iter().filter_map(|p| p["busy"].as_u64()).collect();
            if busy.len() == 2 && busy.iter().all(|&b| b >= 2) && busy.iter().sum::<u64>() == 6 {
                break;
            }
            assert!(Instant::now() < until, "never spread: {ps:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
        kill(pids[0], libc::SIGKILL);
        gets.into_iter()
            .map(|g| g.join().expect("request thread"))
            .collect::<Vec<_>>()
    });
    for r in &answers {
        assert_eq!(r.status, 200, "{r:?}\n{}", site.stderr());
        assert_eq!(pid_of(&ok_report(r)), pids[1], "{r:?}");
    }
}

/// GET `path` on an open HTTP/2 connection: the body as text.
async fn h2_get(
    client: &h2::client::SendRequest<bytes::Bytes>,
    addr: std::net::SocketAddr,
    path: &str,
) -> String {
    let mut c = client.clone().ready().await.expect("ready");
    let req = http::Request::get(format!("http://{addr}{path}"))
        .body(())
        .expect("request");
    let (resp, _) = c.send_request(req, true).expect("send");
    let resp = resp.await.expect("response");
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("body");
        let _ = body.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The same over HTTP/2 (h2c with prior knowledge, RFC 9113 §3.3): a
/// stream opened after the reload on a connection opened before it is
/// served by the new pool at once.
#[test]
fn an_http2_connection_opened_before_a_reload_gets_the_new_pool_on_its_next_stream() {
    let site = Site::start("pool-h2", &app_pool(1, "one"), &routes());
    let addr = site.addr;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (client, conn) = h2::client::handshake(tcp).await.expect("handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let body = h2_get(&client, addr, "/app/?env=GREETING").await;
        assert!(body.contains("env=one\n"), "{body}");
        client
    });
    site.rewrite(&app_pool(1, "two"), &routes());
    reload(&site);
    let t = Instant::now();
    let body = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(20),
            h2_get(&client, addr, "/app/?env=GREETING"),
        )
        .await
        .expect("no answer in 20 s")
    });
    let took = t.elapsed();
    assert!(body.contains("env=two\n"), "{body}\n{}", site.stderr());
    assert!(took < Duration::from_secs(3), "took {took:?}");
}
