//! A private PostgreSQL cluster for the tests that need one (Debian
//! `postgresql`: `initdb` and `pg_ctl`, on a Unix socket in the test's
//! temporary directory, as the `postgres` user when the test runs as root),
//! stopped by its PID when dropped.

use super::TempDir;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The newest installed server's binaries.
pub fn pg_bin() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL's server binaries (initdb, pg_ctl) are not installed: \
             apt-get install postgresql (test.sh installs it)"
        ),
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A command run as the cluster's owner: `postgres` when we are root
/// (PostgreSQL refuses to run as root), ourselves otherwise.
pub fn as_owner(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// A running private cluster, stopped by its PID on drop.
pub struct Cluster {
    pub pid: i32,
    pub socket_dir: PathBuf,
    pub log: PathBuf,
    bin: PathBuf,
}

impl Cluster {
    /// initdb and pg_ctl start in `dir/pg` (superuser `stoa`, trust, a
    /// Unix socket only).
    pub fn start(dir: &TempDir) -> Cluster {
        let bin = pg_bin();
        let base = dir.mkdir("pg");
        let data = base.join("data");
        let socket_dir = dir.mkdir("pg/sock");
        let log = base.join("server.log");
        if is_root() {
            let o = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&base)
                .status()
                .expect("run chown");
            assert!(
                o.success(),
                "chown to postgres (the Debian package's user) failed"
            );
        }
        let out = as_owner(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "stoa",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let opts = format!(
            "-k {} -c listen_addresses='' -c fsync=off",
            socket_dir.display()
        );
        let out = as_owner(&bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(&log)
            .args(["-o", &opts, "-w", "-t", "30", "start"])
            .output()
            .expect("run pg_ctl");
        assert!(
            out.status.success(),
            "pg_ctl start: {}{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let pidfile = std::fs::read_to_string(data.join("postmaster.pid")).expect("postmaster.pid");
        let pid = pidfile
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .expect("a PID in postmaster.pid");
        Cluster {
            pid,
            socket_dir,
            log,
            bin,
        }
    }

    /// A libpq connection string for the superuser and database `postgres`.
    pub fn conninfo(&self) -> String {
        format!(
            "host={} user=stoa dbname=postgres",
            self.socket_dir.display()
        )
    }
}

impl Cluster {
    /// Runs SQL with psql (unaligned, tuples only, stopping at the first
    /// error) and returns its output.
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .arg("-h")
            .arg(&self.socket_dir)
            .args(["-U", "stoa", "-d", "postgres", "-X", "-q", "-A", "-t"])
            .args(["-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // SIGINT: PostgreSQL's fast shutdown. Wait for the postmaster to go.
        // SAFETY: kill with a PID we started.
        unsafe { libc::kill(self.pid, libc::SIGINT) };
        let t = Instant::now();
        // SAFETY: signal 0 only checks that the process exists.
        while unsafe { libc::kill(self.pid, 0) } == 0 && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if unsafe { libc::kill(self.pid, 0) } == 0 {
            // SAFETY: as above.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
        }
    }
}
