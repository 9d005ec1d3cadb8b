//! Privileges: started as root, Stoa binds its listeners, then serves as
//! `user` — its workers, CGI scripts and the FastCGI processes it spawns
//! alike; without a `user` key it runs as `nobody` (nginx's default), and
//! only `user = "root"` written out keeps root. As nginx's master and
//! worker processes, it is then two processes: a parent that stays root
//! (it reads the configuration, keys included, binds, and never reads a
//! request) and the server process, which is the user from its exec on.
//!
//! These tests need root, as CI has (test.sh runs as root to install its
//! Debian packages); as another user they fail saying so.

mod common;
use common::*;
use std::time::Duration;

const HELLO: &str = env!("CARGO_BIN_EXE_stoa-hello-fcgi");

/// `stoa check CFG` must exit 1; what it said.
fn check_fails(cfg: &std::path::Path) -> String {
    let out = std::process::Command::new(stoa_bin())
        .arg("check")
        .arg(cfg)
        .output()
        .expect("run stoa check");
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    text
}

/// A site whose CGI script and FastCGI application report who they run as.
fn whoami_site(tag: &str, user_line: &str) -> (TempDir, Server) {
    let dir = TempDir::new(tag);
    dir.mkdir("www");
    let script = dir.write(
        "cgi-bin/id.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nuid=%s gid=%s\\n' \"$(id -u)\" \"$(id -g)\"\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cfg = dir.path().join("stoa.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = [\"127.0.0.1:0\"]\nworkers = 1\n{user_line}\n[log]\naccess = \"off\"\n\n\
             [[pool]]\nname = \"app\"\ncommand = [\"{HELLO}\"]\n\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"cgi-bin\" }}\n\n\
             [[site.route]]\nprefix = \"/app/\"\nfastcgi = {{ pool = \"app\" }}\n"
        ),
    )
    .expect("write config");
    let server = Server::with_config(&cfg);
    (dir, server)
}

/// The uid the CGI script printed, and the pid the FastCGI app reported.
fn script_uid_and_app_pid(server: &Server) -> (u32, i32) {
    let r = server.get("/cgi-bin/id.sh");
    assert_eq!(r.status, 200, "{r:?}\n{}", server.stderr());
    let text = r.text();
    let uid = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("uid="))
        .and_then(|u| u.parse().ok())
        .unwrap_or_else(|| panic!("no uid in {text:?}"));
    let r = server.get("/app/");
    assert_eq!(r.status, 200, "{r:?}\n{}", server.stderr());
    let pid = r
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("pid="))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {:?}", r.text()));
    (uid, pid)
}

/// The server process under the privileged parent `server`: its only
/// child (scripts and pools are the server process's children).
fn server_process(server: &Server) -> i32 {
    only_child(server.pid(), Duration::from_secs(5)).unwrap_or_else(|kids| {
        panic!(
            "the parent {} has children {kids:?}, not one server process\n{}",
            server.pid(),
            server.stderr()
        )
    })
}

/// The names of a process's threads.
fn threads(pid: i32) -> Vec<String> {
    let mut names = Vec::new();
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in rd.flatten() {
            if let Ok(n) = std::fs::read_to_string(t.path().join("comm")) {
                names.push(n.trim().to_owned());
            }
        }
    }
    names
}

/// The TCP sockets a process holds: (inode, state from /proc/net/tcp: 10
/// is LISTEN, 1 ESTABLISHED).
fn tcp_sockets(pid: i32) -> Vec<(u64, u8)> {
    let mut states = std::collections::HashMap::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let (Some(st), Some(inode)) = (f.get(3), f.get(9)) {
                if let (Ok(st), Ok(inode)) = (u8::from_str_radix(st, 16), inode.parse::<u64>()) {
                    states.insert(inode, st);
                }
            }
        }
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read the fd table")
        .flatten()
    {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        let t = target.to_string_lossy();
        let Some(inode) = t
            .strip_prefix("socket:[")
            .and_then(|r| r.strip_suffix(']'))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        if let Some(&st) = states.get(&inode) {
            out.push((inode, st));
        }
    }
    out.sort();
    out
}

const TCP_LISTEN: u8 = 10;

#[test]
fn started_as_root_with_user_www_data_the_server_its_cgi_scripts_and_spawned_pools_run_as_www_data()
{
    require_root();
    let www = account_uid("www-data");
    let (_dir, server) = whoami_site("priv-www", "user = \"www-data\"");
    assert!(
        server.wait_stderr(0, "running as www-data", Duration::from_secs(5)),
        "{}",
        server.stderr()
    );
    assert_eq!(
        uids(server_process(&server)),
        vec![www; 4],
        "the server process"
    );
    assert_eq!(uids(server.pid()), vec![0; 4], "the privileged parent");
    let (script_uid, app_pid) = script_uid_and_app_pid(&server);
    assert_eq!(script_uid, www, "the CGI script");
    assert_eq!(uids(app_pid), vec![www; 4], "the spawned FastCGI process");
}

#[test]
fn started_as_root_without_a_user_key_stoa_and_its_scripts_run_as_nobody() {
    require_root();
    let nobody = account_uid("nobody");
    let (_dir, server) = whoami_site("priv-nobody", "");
    assert_eq!(uids(server_process(&server)), vec![nobody; 4]);
    let (script_uid, app_pid) = script_uid_and_app_pid(&server);
    assert_eq!(script_uid, nobody);
    assert_eq!(uids(app_pid), vec![nobody; 4]);
}

#[test]
fn user_root_written_out_keeps_root_and_says_so() {
    require_root();
    let (_dir, server) = whoami_site("priv-root", "user = \"root\"");
    assert_eq!(uids(server.pid()), vec![0; 4]);
    assert_eq!(script_uid_and_app_pid(&server).0, 0);
    // After a request: a worker names its thread once it runs.
    assert!(
        threads(server.pid()).iter().any(|t| t == "stoa-worker-0"),
        "one process: the workers are its threads"
    );
    assert!(
        server.wait_stderr(0, "running as root", Duration::from_secs(10)),
        "{}",
        server.stderr()
    );
}

#[test]
fn a_user_that_does_not_exist_is_a_config_error_naming_the_key() {
    let dir = TempDir::new("priv-missing");
    dir.mkdir("www");
    let cfg = dir.path().join("stoa.toml");
    std::fs::write(
        &cfg,
        "user = \"no-such-user-stoa\"\n\n[[site]]\nroot = \"www\"\n",
    )
    .expect("write config");
    let text = check_fails(&cfg);
    assert!(
        text.contains("stoa.toml:1") && text.contains("no such user"),
        "{text}"
    );
}

#[test]
fn a_pool_with_its_own_user_runs_as_it_while_stoa_keeps_root_as_written() {
    require_root();
    let www = account_uid("www-data");
    let dir = TempDir::new("priv-pool-user");
    dir.mkdir("www");
    let cfg = dir.path().join("stoa.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = [\"127.0.0.1:0\"]\nworkers = 1\nuser = \"root\"\n[log]\naccess = \"off\"\n\n\
             [[pool]]\nname = \"app\"\ncommand = [\"{HELLO}\"]\nuser = \"www-data\"\n\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/app/\"\nfastcgi = {{ pool = \"app\" }}\n"
        ),
    )
    .expect("write config");
    let server = Server::with_config(&cfg);
    let r = server.get("/app/");
    assert_eq!(r.status, 200, "{r:?}\n{}", server.stderr());
    let pid: i32 = r
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("pid="))
        .and_then(|p| p.parse().ok())
        .expect("a pid");
    assert_eq!(uids(pid), vec![www; 4], "the pool's process");
    assert_eq!(uids(server.pid()), vec![0; 4], "Stoa itself, as written");
    // Stoa killed outright: the pool's process goes too. Its parent-death
    // signal (prctl(2) PR_SET_PDEATHSIG) is cleared by a change of
    // credentials, so it must be set after the switch to www-data: set
    // before, every such process outlived its Stoa.
    let mut server = server;
    server.signal_now(libc::SIGKILL);
    let _ = server.wait_exit(std::time::Duration::from_secs(5));
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let gone = state.is_empty() || state.split(") ").nth(1).is_some_and(|r| r.starts_with('Z'));
        if gone {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "the pool's process {pid} outlived its Stoa"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_pool_user_without_user_root_is_a_config_error_that_says_why() {
    let dir = TempDir::new("priv-pool-user-bad");
    dir.mkdir("www");
    let cfg = dir.path().join("stoa.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[pool]]\nname = \"app\"\ncommand = [\"{HELLO}\"]\nuser = \"www-data\"\n\n[[site]]\nroot = \"www\"\n"
        ),
    )
    .expect("write config");
    let text = check_fails(&cfg);
    assert!(text.contains("user = \"root\""), "{text}");
}

/// `stoa cert DIR`: (cert, key), the key mode 0600 and owned by root.
fn make_cert(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let out = std::process::Command::new(stoa_bin())
        .arg("cert")
        .arg(dir)
        .arg("localhost")
        .output()
        .expect("run stoa cert");
    assert!(out.status.success(), "stoa cert: {out:?}");
    (dir.join("cert.pem"), dir.join("key.pem"))
}

/// (mode bits, owner) of a file.
fn mode_and_owner(p: &std::path::Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).expect("stat");
    (m.mode() & 0o7777, m.uid())
}

/// `curl` over HTTPS to `localhost:PORT` trusting `ca`: (status, body), 0
/// when no TLS connection was made.
fn curl_https(port: u16, ca: &std::path::Path, path: &str) -> (u16, String) {
    require("curl", "curl");
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10", "--resolve"])
        .arg(format!("localhost:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(ca)
        .args(["-w", "\n%{http_code}"])
        .arg(format!("https://localhost:{port}{path}"))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// A TLS site served as www-data: its config names `certs` and `root`.
fn tls_config(dir: &TempDir, certs: &str, root: &str) -> std::path::PathBuf {
    dir.write(
        "stoa.toml",
        format!(
            "workers = 1\nuser = \"www-data\"\n\n[log]\naccess = \"off\"\n\n\
             [[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{certs}/cert.pem\"\nkey = \"{certs}/key.pem\"\n\n\
             [[site]]\nroot = \"{root}\"\n"
        ),
    )
}

/// Sends `sig` to `pid` once it catches it, and waits for "reloaded" or
/// "reload failed" on the server's stderr past what was there.
fn reload_by(server: &Server, pid: i32) -> String {
    let caught = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .is_some_and(|mask| mask & (1 << (libc::SIGHUP - 1)) != 0)
    };
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while !caught(pid) {
        assert!(
            std::time::Instant::now() < until,
            "{pid} never caught SIGHUP"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let from = server.stderr().len();
    // SAFETY: kill(2) on a process of this test's server.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let tail = server.stderr()[from..].to_owned();
        if tail.contains("reloaded") || tail.contains("reload failed") {
            return tail;
        }
        assert!(
            std::time::Instant::now() < until,
            "no reload after SIGHUP to {pid}:\n{}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// nginx's master process keeps root to read certificates and keys again
/// on a reload (nginx(8), "SIGHUP": the master re-reads the configuration
/// and starts new workers); Stoa's privileged parent does the same and
/// hands them to the server process. A key written by `stoa cert` (0600,
/// root's) stays that way and a reload after the drop still reads it.
#[test]
fn a_reload_after_the_drop_re_reads_a_0600_root_key_and_serves_the_new_certificate_and_root() {
    require_root();
    let dir = TempDir::new("priv-reload-key");
    dir.write("a/page.txt", "from A\n");
    dir.write("b/page.txt", "from B\n");
    let (cert1, key1) = make_cert(&dir.join("first"));
    let (cert2, key2) = make_cert(&dir.join("second"));
    assert_eq!(mode_and_owner(&key1), (0o600, 0));
    let cfg = tls_config(&dir, "first", "a");
    let server = Server::with_config(&cfg);
    let port = server.addr.port();
    assert_eq!(
        curl_https(port, &cert1, "/page.txt"),
        (200, "from A\n".into())
    );

    tls_config(&dir, "second", "b");
    let said = reload_by(&server, server.pid());
    assert!(!said.contains("reload failed"), "{said}");
    assert_eq!(
        curl_https(port, &cert2, "/page.txt"),
        (200, "from B\n".into())
    );
    assert_eq!(
        curl_https(port, &cert1, "/page.txt").0,
        0,
        "the old certificate is no longer offered"
    );
    for key in [&key1, &key2] {
        assert_eq!(mode_and_owner(key), (0o600, 0), "{}", key.display());
    }
    assert!(
        !server.stderr().contains("Permission denied"),
        "{}",
        server.stderr()
    );
}

/// nginx(8): "a master process ... and several worker processes. The main
/// purpose of the master process is to read and evaluate configuration,
/// and maintain worker processes. Worker processes do actual processing of
/// requests." The process with the worker threads is www-data; the parent
/// is root, has no worker thread, and holds no TCP socket of its own: only
/// the very listening sockets the server process accepts on (so no
/// connection can wait at a socket nobody accepts), and no connection.
#[test]
fn the_process_that_accepts_connections_is_not_root_and_the_root_parent_holds_only_its_listeners() {
    require_root();
    let www = account_uid("www-data");
    let (_dir, server) = whoami_site("priv-split", "user = \"www-data\"");
    let child = server_process(&server);
    // A request served: the worker thread runs (and has named itself), and
    // its connection stays open while the sockets are looked at.
    let mut conn = server.connect();
    assert_eq!(conn.request(&get("/app/")).status, 200);

    assert_eq!(uids(server.pid()), vec![0; 4]);
    assert_eq!(uids(child), vec![www; 4]);
    assert!(
        !threads(server.pid())
            .iter()
            .any(|t| t.starts_with("stoa-worker")),
        "{:?}",
        threads(server.pid())
    );
    assert!(
        threads(child).iter().any(|t| t == "stoa-worker-0"),
        "{:?}",
        threads(child)
    );
    let parent_tcp = tcp_sockets(server.pid());
    let child_tcp = tcp_sockets(child);
    assert!(!parent_tcp.is_empty(), "the parent bound the listener");
    for s in &parent_tcp {
        assert_eq!(
            s.1, TCP_LISTEN,
            "the parent holds a connection: {parent_tcp:?}"
        );
        assert!(
            child_tcp.contains(s),
            "the parent's listener {s:?} is not the server's: {child_tcp:?}"
        );
    }
    assert!(
        child_tcp.iter().any(|s| s.1 != TCP_LISTEN),
        "the open connection is the server process's: {child_tcp:?}"
    );
}

/// nginx(8): SIGHUP goes to the master; here either process takes it, and
/// one sent to the server process itself reloads too (it asks the parent
/// for the configuration, read as root).
#[test]
fn a_sighup_sent_to_the_server_process_reloads_too() {
    require_root();
    let dir = TempDir::new("priv-child-hup");
    dir.write("a/page.txt", "from A\n");
    dir.write("b/page.txt", "from B\n");
    let (cert, _key) = make_cert(&dir.join("certs"));
    let server = Server::with_config(&tls_config(&dir, "certs", "a"));
    let port = server.addr.port();
    assert_eq!(
        curl_https(port, &cert, "/page.txt"),
        (200, "from A\n".into())
    );
    tls_config(&dir, "certs", "b");
    let said = reload_by(&server, server_process(&server));
    assert!(!said.contains("reload failed"), "{said}");
    assert_eq!(
        curl_https(port, &cert, "/page.txt"),
        (200, "from B\n".into())
    );

    // A broken file keeps the running configuration, as in one process.
    dir.write("stoa.toml", "[[site]]\nrooot = \"b\"\n");
    let said = reload_by(&server, server_process(&server));
    assert!(
        said.contains("reload failed") && said.contains("rooot"),
        "{said}"
    );
    assert_eq!(
        curl_https(port, &cert, "/page.txt"),
        (200, "from B\n".into())
    );
}

/// nginx(8) -t tests the configuration as the master reads it; Stoa's
/// check also loads it as the user it would serve as, since that user, not
/// root, opens the document roots: a root only root can read fails the
/// check, naming the path.
#[test]
fn stoa_check_as_root_fails_naming_a_root_that_only_root_can_read() {
    require_root();
    let dir = TempDir::new("priv-check");
    dir.write("secret/index.html", "root only\n");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("secret"), std::fs::Permissions::from_mode(0o700))
        .expect("chmod");
    let cfg = dir.write(
        "stoa.toml",
        "user = \"www-data\"\n\n[[site]]\nroot = \"secret\"\n",
    );
    let text = check_fails(&cfg);
    let root = dir.join("secret").canonicalize().expect("canonical");
    assert!(
        text.contains(&root.display().to_string()) && text.contains("www-data"),
        "{text}"
    );
    // Readable by www-data: ok.
    std::fs::set_permissions(dir.join("secret"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let out = std::process::Command::new(stoa_bin())
        .arg("check")
        .arg(&cfg)
        .output()
        .expect("run stoa check");
    assert!(out.status.success(), "{out:?}");
}

/// nginx's master passes SIGTERM/SIGQUIT on to its workers and exits when
/// they have; a worker that dies unasked is the master's to report. Here
/// the parent exits 0 after a stop it passed on, and non-zero (so that
/// systemd's Restart= applies) when the server process is killed under it.
#[test]
fn the_parent_exits_0_after_a_stop_and_non_zero_when_the_server_process_dies_unasked() {
    require_root();
    let (_dir, mut server) = whoami_site("priv-exit", "user = \"www-data\"");
    let child = server_process(&server);
    server.signal(libc::SIGTERM);
    let st = server.wait_exit(Duration::from_secs(10));
    assert_eq!(st.and_then(|s| s.code()), Some(0), "{}", server.stderr());
    let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
    assert!(
        stat.is_empty() || stat.split(") ").nth(1).is_some_and(|r| r.starts_with('Z')),
        "the server process {child} outlived its parent: {stat}"
    );

    let (_dir, mut server) = whoami_site("priv-crash", "user = \"www-data\"");
    let child = server_process(&server);
    // SAFETY: kill(2) on the server process of this test's server.
    assert_eq!(unsafe { libc::kill(child, libc::SIGKILL) }, 0);
    let st = server.wait_exit(Duration::from_secs(10));
    assert!(
        st.is_some_and(|s| s.code().is_some_and(|c| c != 0)),
        "{st:?}\n{}",
        server.stderr()
    );
    assert!(
        server.wait_stderr(0, "ended unexpectedly", Duration::from_secs(10)),
        "{}",
        server.stderr()
    );
}

/// nginx opens its log files in the master, as root, and gives them to
/// the worker user (ngx_reopen_files fchowns them), so the log directory
/// need not be writable by that user. Here the parent creates the access
/// log in a directory only root may write, gives it to www-data, and the
/// server process writes its lines there.
#[test]
fn the_access_log_is_created_by_the_root_parent_in_a_root_only_directory_and_owned_by_the_user() {
    require_root();
    let www = account_uid("www-data");
    let dir = TempDir::new("priv-log");
    dir.write("www/page.txt", "logged\n");
    let logs = dir.mkdir("logs");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&logs, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let log = logs.join("access.log");
    let cfg = dir.write(
        "stoa.toml",
        format!(
            "listen = [\"127.0.0.1:0\"]\nworkers = 1\nuser = \"www-data\"\n\n\
             [log]\naccess = \"{}\"\n\n[[site]]\nroot = \"www\"\n",
            log.display()
        ),
    );
    let server = Server::with_config(&cfg);
    assert_eq!(server.get("/page.txt?mark=broker").status, 200);
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("/page.txt?mark=broker")
    {
        assert!(
            std::time::Instant::now() < until,
            "no access log line in {}:\n{}",
            log.display(),
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(mode_and_owner(&log).1, www, "the log is given to the user");
    assert_eq!(
        mode_and_owner(&logs),
        (0o755, 0),
        "the directory stays root's"
    );
}

/// A server process must not outlive its parent (nginx's workers exit when
/// the master is gone): killed outright, the parent takes the server
/// process with it (prctl(2) PR_SET_PDEATHSIG, set after the change of
/// credentials, which clears it).
#[test]
fn the_parent_killed_outright_takes_the_server_process_with_it() {
    require_root();
    let (_dir, mut server) = whoami_site("priv-pdeath", "user = \"www-data\"");
    let child = server_process(&server);
    server.signal_now(libc::SIGKILL);
    let _ = server.wait_exit(Duration::from_secs(5));
    let gone = wait_until_empty(Duration::from_secs(5), || {
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        let alive =
            !stat.is_empty() && !stat.split(") ").nth(1).is_some_and(|r| r.starts_with('Z'));
        if alive {
            vec![child]
        } else {
            Vec::new()
        }
    });
    assert!(
        gone.is_ok(),
        "the server process {child} outlived its parent"
    );
}

/// nginx(8): SIGQUIT to the master is the graceful shutdown; the master
/// passes it to its workers, which finish what they serve. Here the
/// parent passes it on and closes its copies of the listeners, so new
/// connections are refused, a download in flight still ends byte-exact,
/// and the parent exits 0 after its server process.
#[test]
fn sigquit_to_the_parent_finishes_a_download_in_flight_refuses_new_connections_and_exits_0() {
    require_root();
    const BIG: usize = 4 * 1024 * 1024;
    let dir = TempDir::new("priv-quit");
    dir.write("www/big.bin", pattern(BIG, 5));
    let cfg = dir.write(
        "stoa.toml",
        "listen = [\"127.0.0.1:0\"]\nworkers = 1\nuser = \"www-data\"\n\n[log]\naccess = \"off\"\n\n\
         [cache]\nmax_file_bytes = 65536\n\n[[site]]\nroot = \"www\"\n",
    );
    let mut server = Server::with_config(&cfg);
    let mut c = server.connect();
    c.set_recv_buffer(64 * 1024);
    c.send(&get("/big.bin"));
    let head = c.try_read(true).expect("response head");
    assert_eq!(head.content_length(), Some(BIG as u64));
    let mut body = c.take_pending();
    server.signal(libc::SIGQUIT);
    assert!(
        server.wait_stderr(0, "stopping gracefully", Duration::from_secs(5)),
        "{}",
        server.stderr()
    );
    // Refused once both processes closed the listening socket.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while Conn::try_connect(server.addr).is_ok() {
        assert!(
            std::time::Instant::now() < until,
            "new connections are still accepted into a stopping server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut buf = vec![0u8; 64 * 1024];
    while body.len() < BIG {
        use std::io::Read;
        let want = buf.len().min(BIG - body.len());
        let n = c
            .stream
            .read(&mut buf[..want])
            .unwrap_or_else(|e| panic!("read after {} bytes: {e}", body.len()));
        assert!(n > 0, "closed after {} of {BIG} bytes", body.len());
        body.extend_from_slice(&buf[..n]);
    }
    assert!(body == pattern(BIG, 5), "the in-flight body differs");
    let st = server.wait_exit(Duration::from_secs(10));
    assert_eq!(st.and_then(|s| s.code()), Some(0), "{}", server.stderr());
}

/// Started as root for `nobody`, the cache zone's disk directory that
/// root makes is given to the server (nginx's master makes
/// `proxy_cache_path` directories for its workers' user): objects are
/// written there by the server process, owned by it, and found again
/// after a restart; a reload, which the root parent reads, leaves them
/// there. Before, root made the directory and the server, no longer root,
/// could write nothing to it ("Permission denied"); and the parent, which
/// had indexed the files at its start and never serves, evicted them all
/// as unused (`inactive`) at the first reload past that time.
#[test]
fn started_as_root_the_cache_zone_directory_is_the_servers_and_its_objects_survive_a_restart() {
    require_root();
    let nobody = account_uid("nobody");
    let dir = TempDir::new("priv-cache-disk");
    dir.mkdir("www");
    let cfg = dir.path().join("stoa.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = [\"127.0.0.1:0\"]\nworkers = 1\n\n[log]\naccess = \"off\"\n\n\
             [[pool]]\nname = \"app\"\ncommand = [\"{HELLO}\"]\n\n\
             [[cache_zone]]\nname = \"pages\"\ndisk = \"cache\"\ninactive = \"1s\"\n\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/app/\"\nfastcgi = {{ pool = \"app\" }}\n\
             cache = {{ zone = \"pages\", default_ttl = \"1h\" }}\n"
        ),
    )
    .expect("write config");
    let cache = dir.path().join("cache");
    let mut server = Server::with_config(&cfg);
    let first = server.get("/app/x");
    assert_eq!(first.status, 200, "{first:?}");
    // The object's file appears once the response is complete.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let file = loop {
        let found = std::fs::read_dir(&cache)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name() != "tmp")
            .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
            .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
            .map(|e| e.path())
            .next();
        if let Some(f) = found {
            break f;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no object written under {}: {}",
            cache.display(),
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    use std::os::unix::fs::MetadataExt;
    for p in [cache.clone(), cache.join("tmp"), file.clone()] {
        let owner = std::fs::metadata(&p).expect("stat").uid();
        assert_eq!(
            owner,
            nobody,
            "{} belongs to the server's user",
            p.display()
        );
    }
    server.signal(libc::SIGTERM);
    assert!(
        server.wait_exit(Duration::from_secs(20)).is_some(),
        "stoa did not stop"
    );
    let server = Server::with_config(&cfg);
    // The index is rebuilt in the background: only-if-cached answers 200
    // once the object is found (RFC 9111 §5.2.1.7), never by asking the
    // application.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let r = server.request(&request(
            "GET",
            "/app/x",
            &["Cache-Control: only-if-cached"],
        ));
        if r.status == 200 {
            assert_eq!(r.body, first.body, "the stored response, byte for byte");
            break;
        }
        assert_eq!(r.status, 504, "{r:?}");
        assert!(
            std::time::Instant::now() < deadline,
            "not found after the restart: {}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Past `inactive` since the parent's start, the server using the
    // object all along, then a reload through the parent.
    let only_if_cached = || {
        server.request(&request(
            "GET",
            "/app/x",
            &["Cache-Control: only-if-cached"],
        ))
    };
    let until = std::time::Instant::now() + Duration::from_millis(1500);
    while std::time::Instant::now() < until {
        assert_eq!(only_if_cached().status, 200);
        std::thread::sleep(Duration::from_millis(100));
    }
    let said = reload_by(&server, server.pid());
    assert!(said.contains("reloaded"), "{said}");
    assert!(file.exists(), "{} removed by the reload", file.display());
    let r = only_if_cached();
    assert_eq!((r.status, &r.body), (200, &first.body), "{r:?}");
}
