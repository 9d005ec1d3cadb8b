//! Reloading the configuration on SIGHUP: new connections get the new
//! configuration, open ones keep working, and a broken file changes nothing.

mod common;
use common::*;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(5);

fn two_roots() -> TempDir {
    let d = TempDir::new("reload");
    d.write("a/page.txt", "from A\n");
    d.write("a/dir/x.txt", "x");
    d.write("b/page.txt", "from B\n");
    d.write("b/dir/x.txt", "x");
    d
}

fn site_config(root: &str, autoindex: bool) -> String {
    format!("[[site]]\nroot = \"{root}\"\nautoindex = {autoindex}\n")
}

/// Sends SIGHUP and waits for the server to report the reload.
fn reload(s: &Server) {
    let mark = s.stderr().len();
    s.signal(libc::SIGHUP);
    assert!(
        s.wait_stderr(mark, "reload", WAIT),
        "no reload message on stderr:\n{}",
        s.stderr()
    );
}

#[test]
fn a_new_root_takes_effect_for_new_connections_after_sighup() {
    let d = two_roots();
    let cfg = d.config("stoa.toml", &site_config("a", false));
    let s = Server::with_config(&cfg);
    assert_eq!(s.get("/page.txt").body, b"from A\n");
    d.config("stoa.toml", &site_config("b", false));
    reload(&s);
    assert!(!s.stderr().contains("reload failed"), "{}", s.stderr());
    assert_eq!(s.get("/page.txt").body, b"from B\n");
}

#[test]
fn turning_autoindex_on_takes_effect_after_sighup() {
    let d = two_roots();
    let cfg = d.config("stoa.toml", &site_config("a", false));
    let s = Server::with_config(&cfg);
    assert_eq!(s.get("/dir/").status, 403);
    d.config("stoa.toml", &site_config("a", true));
    reload(&s);
    let r = s.get("/dir/");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.text().contains("x.txt"));
}

#[test]
fn new_limits_take_effect_after_sighup() {
    let d = two_roots();
    let cfg = d.config("stoa.toml", &site_config("a", false));
    let s = Server::with_config(&cfg);
    let long = format!("/page.txt?{}", "q".repeat(300));
    assert_eq!(s.get(&long).status, 200);
    d.config(
        "stoa.toml",
        &format!(
            "[limits]\nmax_uri_bytes = 100\n\n{}",
            site_config("a", false)
        ),
    );
    reload(&s);
    assert_eq!(s.get(&long).status, 414);
}

#[test]
fn a_keep_alive_connection_open_before_sighup_keeps_working_after_it() {
    let d = two_roots();
    let cfg = d.config("stoa.toml", &site_config("a", false));
    let s = Server::with_config(&cfg);
    let mut c = s.connect();
    let r = c.request(&get("/page.txt"));
    assert_eq!(r.body, b"from A\n");
    d.config("stoa.toml", &site_config("b", false));
    reload(&s);
    for _ in 0..3 {
        let r = c.request(&get("/page.txt"));
        assert_eq!(r.status, 200, "{r:?}");
        // Each request takes the newest configuration, on an open
        // connection too (nginx closes it and the client's next one
        // reaches a new worker: the same answer).
        assert_eq!(r.body, b"from B\n", "{r:?}");
    }
    assert_eq!(s.get("/page.txt").body, b"from B\n");
}

#[test]
fn a_broken_config_on_sighup_is_reported_and_the_old_one_keeps_serving() {
    let d = two_roots();
    let cfg = d.config("stoa.toml", &site_config("a", false));
    let s = Server::with_config(&cfg);
    assert_eq!(s.get("/page.txt").body, b"from A\n");
    let mut c = s.connect();
    assert_eq!(c.request(&get("/page.txt")).status, 200);

    // The bad key is on the second line after the prelude.
    d.config("stoa.toml", "[[site]]\nrooot = \"b\"\n");
    let line = CONFIG_PRELUDE.lines().count() + 2;
    let mark = s.stderr().len();
    s.signal(libc::SIGHUP);
    assert!(
        s.wait_stderr(mark, "stoa.toml:", WAIT),
        "the error must name the file and line:\n{}",
        s.stderr()
    );
    let err = s.stderr()[mark..].to_owned();
    assert!(err.contains("rooot"), "the error must name the key: {err}");
    assert!(
        err.contains(&format!("stoa.toml:{line}:")),
        "the error must give line {line}: {err}"
    );

    assert_eq!(s.get("/page.txt").body, b"from A\n");
    assert_eq!(c.request(&get("/page.txt")).status, 200);

    // A root that does not exist is refused the same way.
    d.config("stoa.toml", &site_config("nowhere", false));
    let mark = s.stderr().len();
    s.signal(libc::SIGHUP);
    assert!(s.wait_stderr(mark, "nowhere", WAIT), "{}", s.stderr());
    assert_eq!(s.get("/page.txt").body, b"from A\n");

    // Fixed: the next reload works.
    d.config("stoa.toml", &site_config("b", false));
    reload(&s);
    assert_eq!(s.get("/page.txt").body, b"from B\n");
}

#[test]
fn sighup_without_a_config_file_keeps_serving_the_directory() {
    let d = two_roots();
    let s = Server::serve_dir(&d.join("a"));
    assert_eq!(s.get("/page.txt").body, b"from A\n");
    s.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.get("/page.txt").body, b"from A\n");
}

#[test]
fn sighup_sent_as_soon_as_the_ready_line_appears_does_not_kill_the_server() {
    // Stronger than the loop below: when the ready line is printed, the
    // handlers are already in place.
    {
        let d = two_roots();
        let cfg = d.config("stoa.toml", &site_config("a", false));
        let s = Server::with_config(&cfg);
        let caught = [libc::SIGHUP, libc::SIGTERM, libc::SIGINT].map(|sig| s.catches(sig));
        assert_eq!(
            caught, [true; 3],
            "SIGHUP/SIGTERM/SIGINT handlers missing when the ready line was printed"
        );
    }
    // The ready line is what scripts wait for; a signal right after it must
    // find the handlers installed (otherwise SIGHUP's default action ends
    // the process).
    let d = two_roots();
    let cfg = d.config("stoa.toml", &site_config("a", false));
    // The window is short, so while the race exists this catches it only
    // some of the time.
    for i in 0..20 {
        let mut s = Server::with_config(&cfg);
        s.signal_now(libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(30));
        if let Some(st) = s.wait_exit(Duration::ZERO) {
            panic!("attempt {i}: SIGHUP right after start ended the server: {st}");
        }
    }
    let s = Server::with_config(&cfg);
    assert_eq!(s.get("/page.txt").status, 200);
}
