//! Privileges (issue 9): started as root, Stoa binds its listeners, then
//! runs as `user` — its workers, CGI scripts and the FastCGI processes it
//! spawns alike; without a `user` key it runs as `nobody` (nginx's
//! default), and only `user = "root"` written out keeps root.
//!
//! These tests need root, as CI has (test.sh runs as root to install its
//! Debian packages); as another user they fail saying so.

mod common;
use common::*;
use std::time::Duration;

/// The real, effective, saved and filesystem uids of a process.
fn uids(pid: i32) -> Vec<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    let line = s
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .expect("a Uid line");
    line.split_whitespace()
        .skip(1)
        .map(|n| n.parse().expect("a uid"))
        .collect()
}

fn uid_of(user: &str) -> u32 {
    let out = std::process::Command::new("id")
        .args(["-u", user])
        .output()
        .expect("run id");
    assert!(out.status.success(), "no user {user} on this machine");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a uid")
}

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test checks what Stoa does when started as root: run it as root (CI and `sudo ./test.sh` do)"
    );
}

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

#[test]
fn started_as_root_with_user_www_data_the_server_its_cgi_scripts_and_spawned_pools_run_as_www_data()
{
    require_root();
    let www = uid_of("www-data");
    let (_dir, server) = whoami_site("priv-www", "user = \"www-data\"");
    assert!(
        server.wait_stderr(0, "running as www-data", Duration::from_secs(5)),
        "{}",
        server.stderr()
    );
    assert_eq!(uids(server.pid()), vec![www; 4], "the server itself");
    let (script_uid, app_pid) = script_uid_and_app_pid(&server);
    assert_eq!(script_uid, www, "the CGI script");
    assert_eq!(uids(app_pid), vec![www; 4], "the spawned FastCGI process");
}

#[test]
fn started_as_root_without_a_user_key_stoa_and_its_scripts_run_as_nobody() {
    require_root();
    let nobody = uid_of("nobody");
    let (_dir, server) = whoami_site("priv-nobody", "");
    assert_eq!(uids(server.pid()), vec![nobody; 4]);
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
    assert!(
        server.stderr().contains("running as root"),
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
    let www = uid_of("www-data");
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
