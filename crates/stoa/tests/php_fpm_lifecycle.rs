//! Issue 9: Stoa and a real php-fpm that changes under it: a graceful
//! reload (`kill -USR2`) and workers recycled by `pm.max_requests` must
//! not fail a single request, and connections Stoa keeps alive must not
//! pin php-fpm's children while Stoa is idle (another client of the same
//! php-fpm must be served).
//!
//! Each test starts its own php-fpm with its own pool config, socket in
//! the test's directory. Needs the Debian packages php-fpm and libfcgi-bin
//! (installed by test.sh).

mod common;
mod real_apps;

use common::*;
use real_apps::*;
use std::time::Duration;

const PAGE: &str = "<?php usleep((int)($_GET['sleep_ms'] ?? 0) * 1000); \
                    echo 'ok pid=', getmypid(), \"\\n\";\n";

/// A site whose root holds `p.php`, served by `fpm` as pool `php` with
/// `pool_extra` keys.
fn php_site(dir: &TempDir, fpm: &PhpFpm, capacity: u32, pool_extra: &str) -> Server {
    dir.write("www/p.php", PAGE);
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nsuffix = \".php\"\nfastcgi = {{ pool = \"php\" }}\n\n{}",
            fpm.pool("php", capacity, pool_extra)
        ),
    );
    Server::with_config(&cfg)
}

/// One GET on a fresh connection: the php-fpm worker's pid, or what went
/// wrong.
fn try_page(server: &Server, path: &str) -> Result<i32, String> {
    let mut c = Conn::try_connect(server.addr).map_err(|e| format!("connect: {e}"))?;
    c.try_send(&get(path)).map_err(|e| format!("send: {e}"))?;
    let r = c.try_read_final().map_err(|e| format!("read: {e}"))?;
    if r.status != 200 {
        return Err(format!("status {}: {}", r.status, r.text()));
    }
    r.text()
        .trim()
        .strip_prefix("ok pid=")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("unexpected body {:?}", r.text()))
}

/// Issue 9: php-fpm's graceful reload (`kill -USR2`: the master re-executes
/// itself and replaces every worker) in the middle of 60 GETs through
/// Stoa (pool `capacity = 4`, connections kept alive): every one of them
/// gets its 200. A connection php-fpm closed while Stoa kept it idle must
/// be retried on a fresh one, not turned into a 502.
#[test]
fn php_fpm_reload_with_usr2_fails_no_request() {
    let dir = TempDir::new("fpm-usr2");
    let fpm = PhpFpm::start(&dir, FpmOptions::default());
    let server = php_site(&dir, &fpm, 4, "");
    let mut failures = Vec::new();
    let mut pids_before = Vec::new();
    let mut pids_after = Vec::new();
    for i in 0..60 {
        if i == 20 {
            // SAFETY: kill(2) on the php-fpm master this test started.
            let r = unsafe { libc::kill(fpm.pid(), libc::SIGUSR2) };
            assert_eq!(r, 0, "kill -USR2 php-fpm");
        }
        match try_page(&server, "/p.php") {
            Ok(pid) if i < 20 => pids_before.push(pid),
            Ok(pid) => pids_after.push(pid),
            Err(e) => failures.push(format!("GET {i}: {e}")),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        failures.is_empty(),
        "{} of 60 GETs failed across php-fpm's reload: {failures:#?}\nstoa stderr:\n{}\nphp-fpm:\n{}",
        failures.len(),
        server.stderr(),
        fpm.log()
    );
    // The reload did happen: the later requests met new workers.
    assert!(
        pids_after.iter().any(|p| !pids_before.contains(p)),
        "php-fpm's workers were not replaced: {pids_before:?} / {pids_after:?}"
    );
}

/// Issue 9: php-fpm with `pm.max_requests = 3` ends each worker after its
/// third request, closing the connection Stoa kept alive to it; over 60
/// GETs every one gets its 200 (Stoa retries on a fresh connection
/// instead of failing the request).
#[test]
fn php_fpm_recycling_workers_with_max_requests_fails_no_request() {
    let dir = TempDir::new("fpm-maxreq");
    let fpm = PhpFpm::start(
        &dir,
        FpmOptions {
            max_requests: 3,
            ..FpmOptions::default()
        },
    );
    let server = php_site(&dir, &fpm, 4, "");
    let mut failures = Vec::new();
    let mut pids = Vec::new();
    for i in 0..60 {
        match try_page(&server, "/p.php") {
            Ok(pid) => pids.push(pid),
            Err(e) => failures.push(format!("GET {i}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 60 GETs failed while php-fpm recycled workers: {failures:#?}\nstoa stderr:\n{}\nphp-fpm:\n{}",
        failures.len(),
        server.stderr(),
        fpm.log()
    );
    pids.sort_unstable();
    pids.dedup();
    assert!(
        pids.len() > 4,
        "workers were recycled (at most 3 requests each): {pids:?}"
    );
}

/// Issue 9 (the stall nginx's `fastcgi_keep_conn` causes): php-fpm with
/// two children (`pm = static`, `pm.max_children = 2`) behind Stoa with
/// `capacity = 2` and `keepalive_timeout = "1s"`. After a burst through
/// Stoa fills both children with kept-alive connections, and Stoa has
/// been idle longer than that timeout, another FastCGI client of the
/// same php-fpm (`cgi-fcgi -bind -connect`) gets its answer within 5 s:
/// Stoa does not pin php-fpm's children with idle parked connections.
#[test]
fn an_idle_stoa_leaves_php_fpm_free_for_another_client() {
    require("/usr/bin/cgi-fcgi", "libfcgi-bin");
    let dir = TempDir::new("fpm-idle");
    let fpm = PhpFpm::start(
        &dir,
        FpmOptions {
            children: 2,
            ..FpmOptions::default()
        },
    );
    let server = php_site(&dir, &fpm, 2, "keepalive_timeout = \"1s\"\n");
    let results = parallel_gets(&server, 8, "/p.php?sleep_ms=50");
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failures.is_empty(),
        "the burst through Stoa: {failures:?}\n{}",
        server.stderr()
    );
    std::thread::sleep(Duration::from_millis(2000));
    let page = dir.join("www/p.php");
    let mut cmd = std::process::Command::new("/usr/bin/cgi-fcgi");
    cmd.args(["-bind", "-connect"])
        .arg(&fpm.sock)
        .env_clear()
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("REQUEST_METHOD", "GET")
        .env("SCRIPT_FILENAME", &page)
        .env("SCRIPT_NAME", "/p.php")
        .env("QUERY_STRING", "")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("SERVER_NAME", "t")
        .env("SERVER_PORT", "80");
    let out = run_with_deadline(&mut cmd, Duration::from_secs(5)).unwrap_or_else(|| {
        panic!(
            "cgi-fcgi got no answer from php-fpm within 5 s while Stoa was idle: \
             its children are held by Stoa's parked connections\nstoa stderr:\n{}",
            server.stderr()
        )
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("ok pid="), "cgi-fcgi's answer: {stdout}");
    // Stoa still serves afterwards.
    assert!(try_page(&server, "/p.php").is_ok());
}

/// `n` GETs of `path` at once, one thread each.
fn parallel_gets(server: &Server, n: usize, path: &str) -> Vec<Result<i32, String>> {
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..n).map(|_| s.spawn(|| try_page(server, path))).collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    })
}
