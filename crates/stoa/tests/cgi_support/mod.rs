//! Helpers for the CGI tests: a site with the scripts of `tests/cgi-scripts`
//! copied into a temporary `cgi-bin` (modes set here, since git may lose
//! them), required programs checked with a message naming the Debian
//! package, `/proc` probes (process groups, zombies, memory, descriptors)
//! and a counting reader for very large chunked responses.

#![allow(dead_code)]

use crate::common::{find, Server, TempDir};
use std::collections::BTreeMap;
use std::io::{self, Read};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The scripts, pages and C source the tests run.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/cgi-scripts")
}

pub use crate::common::PHP_CGI;

pub use crate::common::require;

pub fn require_perl() {
    require("/usr/bin/perl", "perl");
}

pub fn require_php() {
    require(PHP_CGI, "php-cgi");
}

/// How a test's site is configured.
pub struct Opts {
    /// The `/cgi-bin/` route's timeout.
    pub timeout: &'static str,
    pub pass_authorization: bool,
    /// Add `suffix = ".php"` run by php-cgi.
    pub php: bool,
    /// Put the scripts under the site root (`www/cgi-bin`) instead of next
    /// to it.
    pub cgi_in_root: bool,
    /// Top-level sections (`[cgi]`, `[limits]`) added to the config.
    pub top: String,
}

impl Default for Opts {
    fn default() -> Opts {
        Opts {
            timeout: "2s",
            pass_authorization: false,
            php: false,
            cgi_in_root: false,
            top: String::new(),
        }
    }
}

/// A temporary site (`www/` as root, scripts in `cgi-bin/`) and its server.
pub struct Site {
    // Declared first: the server stops before its directory is removed.
    pub server: Server,
    pub dir: TempDir,
    pub cgi_bin: PathBuf,
    pub www: PathBuf,
}

impl std::ops::Deref for Site {
    type Target = Server;
    fn deref(&self) -> &Server {
        &self.server
    }
}

fn copy_tree(src: &Path, dst: &Path, mode: u32) {
    std::fs::create_dir_all(dst).expect("create dir");
    for e in std::fs::read_dir(src).unwrap_or_else(|e| panic!("read {}: {e}", src.display())) {
        let e = e.expect("dir entry");
        let to = dst.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            copy_tree(&e.path(), &to, mode);
        } else {
            std::fs::copy(e.path(), &to).expect("copy script");
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
    }
}

pub fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

impl Site {
    pub fn start(opts: Opts) -> Site {
        let dir = TempDir::new("cgi");
        let src = scripts_dir();
        let www = dir.join("www");
        let cgi_rel = if opts.cgi_in_root {
            "www/cgi-bin"
        } else {
            "cgi-bin"
        };
        let cgi_bin = dir.join(cgi_rel);
        copy_tree(&src.join("www"), &www, 0o644);
        copy_tree(&src.join("cgi-bin"), &cgi_bin, 0o755);
        // A script outside any CGI directory (must never run), and the
        // traps inside cgi-bin that point at it.
        chmod(&www.join("x"), 0o755);
        dir.write(
            "outside/evil.sh",
            "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nEXECUTED-OUTSIDE-CGI-BIN\\n'\n",
        );
        chmod(&dir.join("outside/evil.sh"), 0o755);
        dir.symlink(dir.join("outside/evil.sh"), &format!("{cgi_rel}/link.sh"));
        dir.symlink(dir.join("outside"), &format!("{cgi_rel}/linkdir"));
        let noexec = dir.write(
            &format!("{cgi_rel}/noexec.sh"),
            "#!/bin/sh\n# SECRET-SOURCE-MARKER\nprintf 'Content-Type: text/plain\\n\\nran\\n'\n",
        );
        chmod(&noexec, 0o644);
        let mut body = opts.top.clone();
        body.push_str(&format!(
            "\n[[site]]\nroot = \"www\"\n\n[[site.route]]\nprefix = \"/cgi-bin/\"\n\
             cgi = {{ dir = \"{cgi_rel}\", timeout = \"{}\", pass_authorization = {} }}\n",
            opts.timeout, opts.pass_authorization
        ));
        if opts.php {
            require_php();
            body.push_str(&format!(
                "\n[[site.route]]\nsuffix = \".php\"\ncgi = {{ interpreter = \"{PHP_CGI}\", timeout = \"10s\" }}\n"
            ));
        }
        let cfg = dir.config("stoa.toml", &body);
        let server = Server::with_config(&cfg);
        Site {
            server,
            dir,
            cgi_bin,
            www,
        }
    }

    pub fn default_site() -> Site {
        Site::start(Opts::default())
    }

    /// Compiles `tests/cgi-scripts/c/NAME.c` into cgi-bin as `NAME`.
    pub fn compile_c(&self, name: &str) -> PathBuf {
        require("cc", "gcc");
        let out = self.cgi_bin.join(name);
        let src = scripts_dir().join(format!("c/{name}.c"));
        let r = std::process::Command::new("cc")
            .arg("-O2")
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .output()
            .expect("run cc");
        assert!(
            r.status.success(),
            "cc {} failed: {}",
            src.display(),
            String::from_utf8_lossy(&r.stderr)
        );
        chmod(&out, 0o755);
        out
    }

    /// Waits for a script to leave its PID in `cgi-bin/NAME` and reads it.
    pub fn wait_pid_file(&self, name: &str, within: Duration) -> i32 {
        let p = self.cgi_bin.join(name);
        let until = Instant::now() + within;
        loop {
            if let Some(pid) = std::fs::read_to_string(&p)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                return pid;
            }
            assert!(
                Instant::now() < until,
                "the script never wrote {}",
                p.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Parses env.pl's output: sorted NAME=value lines, then `--body--`.
pub fn env_of(body: &[u8]) -> (BTreeMap<String, String>, Vec<u8>) {
    let sep = find(body, b"--body--\n")
        .unwrap_or_else(|| panic!("no --body-- in {:?}", String::from_utf8_lossy(body)));
    let vars = String::from_utf8_lossy(&body[..sep])
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    (vars, body[sep + 9..].to_vec())
}

// ---------------------------------------------------------------------------
// /proc

pub use super::common::processes;

/// Live (not zombie) processes in process group `pgid`.
pub fn group_alive(pgid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|&(_, st, _, g)| g == pgid && st != 'Z' && st != 'X')
        .map(|(p, ..)| p)
        .collect()
}

/// Waits until no live process is left in group `pgid`; returns how long
/// that took, or the survivors.
pub fn wait_group_gone(pgid: i32, within: Duration) -> Result<Duration, Vec<i32>> {
    super::common::wait_until_empty(within, || group_alive(pgid))
}

/// Children of `ppid` that are zombies.
pub fn zombie_children(ppid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|&(_, st, pp, _)| pp == ppid && st == 'Z')
        .map(|(p, ..)| p)
        .collect()
}

/// Children of `ppid`, any state.
pub fn children(ppid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|&(_, _, pp, _)| pp == ppid)
        .map(|(p, ..)| p)
        .collect()
}

/// Resident memory of `pid` in KiB (VmRSS).
pub fn rss_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS for {pid}"))
}

/// Open descriptors of `pid`.
pub fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Polls `cond` every 20 ms for up to `within`.
pub fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------
// Large bodies

/// Reads a chunked body to its end without keeping it, checking the
/// framing; `pending` holds bytes already received after the head. Returns
/// the decoded length.
pub fn count_chunked(stream: &mut TcpStream, pending: Vec<u8>) -> io::Result<u64> {
    let mut data = pending;
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    let eof = || io::Error::new(io::ErrorKind::UnexpectedEof, "closed inside a chunked body");
    let mut line = |data: &mut Vec<u8>, stream: &mut TcpStream| -> io::Result<Vec<u8>> {
        loop {
            if let Some(i) = find(data, b"\r\n") {
                let l = data[..i].to_vec();
                data.drain(..i + 2);
                return Ok(l);
            }
            let n = stream.read(&mut buf[..4096])?;
            if n == 0 {
                return Err(eof());
            }
            data.extend_from_slice(&buf[..n]);
        }
    };
    let mut big = vec![0u8; 256 * 1024];
    loop {
        let l = line(&mut data, stream)?;
        let l = String::from_utf8_lossy(&l).into_owned();
        let size = u64::from_str_radix(l.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| io::Error::other(format!("bad chunk size line {l:?}")))?;
        if size == 0 {
            while !line(&mut data, stream)?.is_empty() {}
            return Ok(total);
        }
        let mut left = size as usize;
        let take = left.min(data.len());
        data.drain(..take);
        left -= take;
        while left > 0 {
            let n = stream.read(&mut big[..left.min(256 * 1024)])?;
            if n == 0 {
                return Err(eof());
            }
            left -= n;
        }
        total += size;
        if line(&mut data, stream)? != b"" {
            return Err(io::Error::other("chunk data not followed by CRLF"));
        }
    }
}

/// Builds a multipart/form-data body (RFC 7578) from fields and files
/// (name, filename, content).
pub fn multipart(
    boundary: &str,
    fields: &[(&str, &str)],
    files: &[(&str, &str, &[u8])],
) -> Vec<u8> {
    let mut b = Vec::new();
    for (name, value) in fields {
        b.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    for (name, filename, content) in files {
        b.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n\
                 Content-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        b.extend_from_slice(content);
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    b
}

/// Encodes `body` as chunks of `size` bytes (plus the last chunk).
pub fn chunked(body: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / size * 12 + 16);
    for c in body.chunks(size) {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}
