//! A private MariaDB server for the real-application tests (WordPress,
//! phpMyAdmin): Debian's `mariadb-server`, `mariadbd` on a Unix socket in
//! the test's directory, no TCP, as the `mysql` user when the test runs
//! as root.

use super::{is_root, run, run_with_deadline};
use crate::common::TempDir;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private MariaDB server: `mariadb-install-db` and `mariadbd` with
/// their data, socket and log in `DIR/mariadb`, no TCP listener.
/// Stopped (SIGTERM, then SIGKILL past 10 s) on drop.
pub struct MariaDb {
    child: Child,
    pub sock: PathBuf,
    log: PathBuf,
}

fn mariadb_cmd(program: &str) -> Command {
    let mut c = Command::new(program);
    c.arg("--no-defaults");
    c
}

impl MariaDb {
    pub fn start(dir: &TempDir) -> MariaDb {
        let base = dir.mkdir("mariadb");
        let data = base.join("data");
        let sock = base.join("mysqld.sock");
        let log = base.join("error.log");
        // A temporary directory of its own: servers bootstrapping at once
        // in a shared /tmp collide on their temporary tables' names
        // (`#sql-temptable-...`) and the install fails.
        let tmp = dir.mkdir("mariadb/tmp");
        if is_root() {
            // mariadbd refuses to run as root; it switches to `mysql`
            // (the Debian package's user), which must own its files.
            run(Command::new("chown").args(["-R", "mysql:mysql"]).arg(&base));
        }
        let mut install = mariadb_cmd("mariadb-install-db");
        install
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ]);
        if is_root() {
            install.arg("--user=mysql");
        }
        let out = run_with_deadline(&mut install, Duration::from_secs(60))
            .expect("mariadb-install-db took longer than 60 s");
        assert!(
            out.status.success(),
            "mariadb-install-db: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut cmd = mariadb_cmd("/usr/sbin/mariadbd");
        cmd.arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--socket={}", sock.display()))
            .arg(format!("--pid-file={}", base.join("mysqld.pid").display()))
            .arg(format!("--log-error={}", log.display()))
            .args([
                "--skip-networking",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=16M",
                "--innodb-flush-log-at-trx-commit=0",
                "--skip-name-resolve",
            ]);
        if is_root() {
            cmd.arg("--user=mysql");
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mariadbd");
        let mut db = MariaDb { child, sock, log };
        let until = Instant::now() + Duration::from_secs(30);
        while UnixStream::connect(&db.sock).is_err() {
            if let Ok(Some(st)) = db.child.try_wait() {
                panic!(
                    "mariadbd exited ({st}) before listening; its log:\n{}",
                    db.log()
                );
            }
            assert!(
                Instant::now() < until,
                "mariadbd never listened on {} within 30 s; its log:\n{}",
                db.sock.display(),
                db.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        db
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Runs SQL as MariaDB's root over the socket.
    pub fn sql(&self, sql: &str) -> String {
        let mut c = mariadb_cmd("mariadb");
        c.arg(format!("--socket={}", self.sock.display()))
            .args(["-u", "root", "-N", "-B", "-e", sql]);
        String::from_utf8_lossy(&run(&mut c)).into_owned()
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: our child, not yet reaped; kill has no memory effects.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if Instant::now() >= until => break,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
