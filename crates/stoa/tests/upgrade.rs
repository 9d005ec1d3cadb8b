//! Upgrading the binary on SIGUSR2, nginx's procedure ("Upgrading
//! Executable on the Fly", nginx.org/en/docs/control.html): the running
//! process starts the binary at the path it was started from with the same
//! arguments and its listening sockets, the new one reports ready, the old
//! one stops gracefully. Stoa is started through a symlink, as a package's
//! /usr/bin/stoa is, so that the tests can replace what the path names.
//!
//! Started as root with a `user`, the root parent upgrades: the new binary
//! runs as root, becomes a new parent with its own server process, and the
//! old parent stops its server process once the new one is ready; those
//! tests run as root with `user = "www-data"`.

mod common;
use common::*;
use std::ffi::OsStr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(15);

/// The one server process under the privileged parent `parent`.
fn server_child(parent: i32) -> i32 {
    only_child(parent, WAIT)
        .unwrap_or_else(|kids| panic!("the parent {parent} has no single server process: {kids:?}"))
}

/// The new binary: once the old one exits it belongs to nobody here, so it
/// is stopped by pid at the end of the test.
struct Successor(i32);

impl Drop for Successor {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the pid the old server reported for the
        // process it started; the test caused it and ends it.
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit(')').next().map(|r| r.trim_start().to_owned()))
        .is_some_and(|r| !r.starts_with('Z'))
}

/// A site with a status page served as `user`, started through
/// `DIR/bin/stoa`, a symlink.
fn setup(d: &TempDir, user: &str) -> (PathBuf, PathBuf) {
    if user != "root" {
        require_root();
    }
    d.write("www/page.txt", "x".repeat(2000));
    let cfg = d.write(
        "stoa.toml",
        format!(
            "listen = [\"127.0.0.1:0\"]\nworkers = 2\nuser = \"{user}\"\n\n[log]\naccess = \"off\"\n\n\
             [[site]]\nroot = \"www\"\n[[site.route]]\nprefix = \"/status\"\nstatus = {{}}\n"
        ),
    );
    d.mkdir("bin");
    let exe = d.symlink(stoa_bin(), "bin/stoa");
    (exe, cfg)
}

fn start(exe: &Path, cfg: &Path, env: &[(&str, &OsStr)]) -> Server {
    Server::try_spawn_program(
        exe.as_os_str(),
        [OsStr::new("serve"), OsStr::new("--config"), cfg.as_os_str()],
        env,
    )
    .unwrap_or_else(|e| panic!("stoa did not start: {e}"))
}

/// Shell that waits for `file` to appear, at most 15 s (so that a failed
/// test leaves no endless loop behind).
fn gate(file: &Path) -> String {
    format!(
        "i=0; while [ ! -e '{}' ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done",
        file.display()
    )
}

/// Replaces the program at `exe` by a shell script.
fn replace_with_script(exe: &Path, body: &str) {
    let tmp = exe.with_extension("new");
    std::fs::write(&tmp, format!("#!/bin/sh\n{body}\n")).expect("write script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::rename(&tmp, exe).expect("replace the binary");
}

/// The pid the log names after `marker`, past byte `mark`.
fn pid_after(s: &Server, mark: usize, marker: &str) -> i32 {
    let log = s.stderr();
    log[mark..]
        .split(marker)
        .nth(1)
        .map(|r| {
            r.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid after {marker:?} in:\n{log}"))
}

fn responses(s: &Server) -> u64 {
    s.get("/status")
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("responses: "))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// USR2 under `stoa bench -k` load: the new binary takes over with no
/// failed request. Under a privileged parent the signal goes to the server
/// process, which passes it to its parent.
fn upgrade_under_load(user: &str) {
    let d = TempDir::new("upgrade-load");
    let (exe, cfg) = setup(&d, user);
    let notify_path = d.join("notify.sock");
    let manager = UnixDatagram::bind(&notify_path).expect("bind");
    manager.set_read_timeout(Some(WAIT)).expect("timeout");
    let mut s = start(&exe, &cfg, &[("NOTIFY_SOCKET", notify_path.as_os_str())]);
    let old = s.pid();

    let mut bench = Command::new(stoa_bin())
        .args(["bench", "-k", "-c", "8", "-t", "8", "-q"])
        .arg(format!("http://{}/page.txt", s.addr))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stoa bench");
    // The load is on before the upgrade.
    let until = Instant::now() + WAIT;
    while responses(&s) < 500 {
        assert!(Instant::now() < until, "stoa bench sent no load");
        std::thread::sleep(Duration::from_millis(20));
    }

    let mark = s.stderr().len();
    let old_child = (user != "root").then(|| server_child(old));
    match old_child {
        Some(c) => {
            let until = Instant::now() + WAIT;
            while !catches(c, libc::SIGUSR2) {
                assert!(
                    Instant::now() < until,
                    "the server process never caught USR2"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            // SAFETY: kill(2) on the server process this test's Stoa started.
            assert_eq!(unsafe { libc::kill(c, libc::SIGUSR2) }, 0);
            assert!(
                s.wait_stderr(mark, "the privileged parent upgrades", WAIT),
                "{}",
                s.stderr()
            );
        }
        None => s.signal(libc::SIGUSR2),
    }
    assert!(
        s.wait_stderr(mark, " serves; stopping gracefully", WAIT),
        "no hand-over:\n{}",
        s.stderr()
    );
    let new = pid_after(&s, mark, "upgrade: pid ");
    let _successor = Successor(new);
    assert_ne!(new, old);

    // The old process finishes its responses and exits 0, while the load
    // goes on against the new one.
    let st = s.wait_exit(WAIT).expect("the old process must exit");
    assert!(st.success(), "the old process exited with {st}");
    assert!(alive(new), "the new process is gone:\n{}", s.stderr());
    if let Some(old_child) = old_child {
        // The new binary is a new root parent with its own server process
        // as the user; the old server process is gone with its parent.
        assert_eq!(uids(new), vec![0; 4]);
        let new_child = server_child(new);
        assert_ne!(new_child, old_child);
        assert_eq!(
            uids(new_child),
            vec![account_uid(user); 4],
            "{}",
            s.stderr()
        );
        assert!(!alive(old_child));
    }
    assert!(
        matches!(bench.try_wait(), Ok(None)),
        "the load ended before the hand-over did: the test proves nothing on a machine this slow"
    );
    // Whatever answers now is not the old process: it has exited.
    assert_eq!(s.get("/page.txt").status, 200);

    let until = Instant::now() + Duration::from_secs(30);
    let st = loop {
        if let Ok(Some(st)) = bench.try_wait() {
            break st;
        }
        assert!(Instant::now() < until, "stoa bench did not end");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    if let Some(mut o) = bench.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut o, &mut out);
    }
    assert!(st.success(), "stoa bench: {st}\n{out}");
    let field = |name: &str| -> Option<u64> {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|n| n.parse().ok())
    };
    assert!(field("Complete requests:").unwrap_or(0) > 1000, "{out}");
    assert_eq!(field("Failed requests:"), Some(0), "{out}");
    assert_eq!(field("Non-2xx responses:"), None, "{out}");

    // Under systemd the unit follows the new process: MAINPID= from both
    // sides (the old one's counts with NotifyAccess=main), and no
    // STOPPING=1 from the old one, which would stop the unit.
    let mut from_new = false;
    let mut from_old = false;
    let mut buf = [0u8; 4096];
    let mut seen = Vec::new();
    while !(from_new && from_old) {
        let n = manager
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("notifications so far {seen:?}: {e}"));
        let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert!(!msg.contains("STOPPING=1"), "{msg:?}");
        if msg.contains(&format!("MAINPID={new}\n")) {
            if msg.contains("READY=1") {
                from_new = true;
            } else {
                from_old = true;
            }
        }
        seen.push(msg);
    }
}

#[test]
fn usr2_under_keep_alive_load_hands_over_to_the_new_binary_with_0_failed_requests_as_nginx_does() {
    upgrade_under_load(ONE_PROCESS);
}

#[test]
fn usr2_to_the_www_data_server_process_under_load_has_the_root_parent_hand_over_to_a_new_parent_and_child_with_0_failed_requests(
) {
    upgrade_under_load(TWO_PROCESSES);
}

fn broken_new_binary(user: &str) {
    let d = TempDir::new("upgrade-broken");
    let (exe, cfg) = setup(&d, user);
    let mut s = start(&exe, &cfg, &[]);
    // A package upgrade left something at the path that cannot run.
    // (/proc/self/exe would still be the working binary.)
    replace_with_script(&exe, "echo 'new binary: broken' >&2\nexit 1");
    let mark = s.stderr().len();
    s.signal(libc::SIGUSR2);
    assert!(
        s.wait_stderr(mark, "upgrade failed, still serving", WAIT),
        "{}",
        s.stderr()
    );
    assert!(
        s.stderr()[mark..].contains("exit status: 1"),
        "{}",
        s.stderr()
    );
    assert_eq!(s.get("/page.txt").status, 200);
    assert!(s.wait_exit(Duration::from_millis(200)).is_none());
    s.signal(libc::SIGQUIT);
    let st = s.wait_exit(WAIT).expect("exit after SIGQUIT");
    assert!(st.success(), "{st}");
}

#[test]
fn a_usr2_whose_new_binary_exits_1_leaves_the_old_one_serving() {
    broken_new_binary(ONE_PROCESS);
}

#[test]
fn a_usr2_to_the_root_parent_whose_new_binary_exits_1_leaves_parent_and_server_process_serving() {
    broken_new_binary(TWO_PROCESSES);
}

#[test]
fn a_second_usr2_while_an_upgrade_is_in_progress_is_refused_with_a_log_line() {
    let d = TempDir::new("upgrade-twice");
    let (exe, cfg) = setup(&d, ONE_PROCESS);
    let s = start(&exe, &cfg, &[]);
    // A new binary that takes its time (until the test says), then fails.
    let go = d.join("go");
    replace_with_script(&exe, &format!("{}\nexit 1", gate(&go)));
    let mark = s.stderr().len();
    s.signal(libc::SIGUSR2);
    assert!(
        s.wait_stderr(mark, "serving until it is ready", WAIT),
        "{}",
        s.stderr()
    );
    s.signal(libc::SIGUSR2);
    assert!(
        s.wait_stderr(mark, "SIGUSR2 ignored: an upgrade to pid", WAIT),
        "{}",
        s.stderr()
    );
    assert_eq!(
        s.stderr()[mark..]
            .matches("serving until it is ready")
            .count(),
        1
    );
    std::fs::write(&go, "").expect("write");
    assert!(
        s.wait_stderr(mark, "upgrade failed, still serving", WAIT),
        "{}",
        s.stderr()
    );
    assert_eq!(s.get("/page.txt").status, 200);
}

#[test]
fn quit_to_the_old_process_during_an_upgrade_leaves_the_sockets_to_the_new_one_as_nginx_by_hand() {
    let d = TempDir::new("upgrade-by-hand");
    let (exe, cfg) = setup(&d, ONE_PROCESS);
    let mut s = start(&exe, &cfg, &[]);
    // The new binary is the real one behind a gate the test opens.
    let go = d.join("go");
    replace_with_script(
        &exe,
        &format!("{}\nexec '{}' \"$@\"", gate(&go), stoa_bin()),
    );
    let mark = s.stderr().len();
    s.signal(libc::SIGUSR2);
    assert!(
        s.wait_stderr(mark, "serving until it is ready", WAIT),
        "{}",
        s.stderr()
    );
    let new = pid_after(&s, mark, " as pid ");
    let _successor = Successor(new);

    // The operator stops the old one by hand before the new one is ready.
    s.signal(libc::SIGQUIT);
    let st = s.wait_exit(WAIT).expect("the old process must exit");
    assert!(st.success(), "{st}");
    assert!(
        s.stderr()[mark..].contains("keeps the sockets"),
        "{}",
        s.stderr()
    );

    // Nobody accepts now, yet the socket is open in the new process: a
    // connection queues instead of being refused, and is answered once
    // the new binary runs.
    let mut c = Conn::try_connect(s.addr).expect("the socket must stay open");
    c.send(&get("/page.txt"));
    std::fs::write(&go, "").expect("write");
    let r = c.try_read_final().expect("the new process answers");
    assert_eq!(r.status, 200);
    assert!(alive(new));
}

/// What a Unix-socket listener at `sock` answers to `bytes` (read until
/// it closes the connection).
fn over_unix(sock: &Path, bytes: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut c = std::os::unix::net::UnixStream::connect(sock).expect("connect to the socket");
    c.set_read_timeout(Some(WAIT)).expect("timeout");
    c.write_all(bytes).expect("send");
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// nginx's upgrade hands every listening socket to the new master, Unix
/// ones included. Here the new binary inherits the Unix listener itself
/// (the same socket file, not made again: no moment without a listener),
/// with its `[proxy_protocol]` setting; the old process leaves the file,
/// and the new one removes it at its own stop.
fn unix_listener_handed_over(user: &str) {
    let d = TempDir::new("upgrade-unix");
    let (exe, _) = setup(&d, user);
    let sock = d.join("http.sock");
    let cfg = d.write(
        "unix.toml",
        format!(
            "listen = [\"127.0.0.1:0\", \"unix:{0}\"]\nworkers = 2\nuser = \"{user}\"\n\n\
             [log]\naccess = \"off\"\n\n[unix_socket]\nmode = \"0660\"\n\n\
             [proxy_protocol]\nlisten = [\"unix:{0}\"]\n\n[[site]]\nroot = \"www\"\n",
            sock.display()
        ),
    );
    let mut s = start(&exe, &cfg, &[]);
    let with_header =
        b"PROXY TCP4 203.0.113.9 127.0.0.1 5555 80\r\nGET /page.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let without = b"GET /page.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    assert!(over_unix(&sock, with_header).starts_with("HTTP/1.1 200 "));
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(&sock).expect("socket file").ino();

    let mark = s.stderr().len();
    s.signal(libc::SIGUSR2);
    assert!(
        s.wait_stderr(mark, " serves; stopping gracefully", WAIT),
        "no hand-over:\n{}",
        s.stderr()
    );
    let new = pid_after(&s, mark, "upgrade: pid ");
    let successor = Successor(new);
    let st = s.wait_exit(WAIT).expect("the old process must exit");
    assert!(st.success(), "the old process exited with {st}");
    assert!(alive(new), "the new process is gone:\n{}", s.stderr());

    // The old one left the file; the new one serves the same socket, and
    // still expects the PROXY header on it.
    let meta = std::fs::metadata(&sock).expect("the socket file after the hand-over");
    assert_eq!(meta.ino(), inode, "the socket was made again");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    let r = over_unix(&sock, with_header);
    assert!(r.starts_with("HTTP/1.1 200 "), "{r}\n{}", s.stderr());
    assert_eq!(over_unix(&sock, without), "", "served without a header");

    // The new process answers for the file now: gone after its stop.
    // SAFETY: kill(2) on the process the old server started for this test.
    assert_eq!(unsafe { libc::kill(new, libc::SIGTERM) }, 0);
    let until = Instant::now() + WAIT;
    while alive(new) {
        assert!(Instant::now() < until, "the new process did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(successor);
    assert!(
        !sock.exists(),
        "the socket file is left after the new process stopped"
    );
}

#[test]
fn usr2_hands_the_unix_listener_and_its_proxy_protocol_setting_to_the_new_binary_which_removes_it_at_stop(
) {
    unix_listener_handed_over(ONE_PROCESS);
}

#[test]
fn under_a_root_parent_usr2_hands_the_unix_listener_to_the_new_parent_and_its_www_data_child() {
    unix_listener_handed_over(TWO_PROCESSES);
}
