//! Helpers for the tests against real applications from Debian packages
//! (DokuWiki, Adminer, cgit, gitweb, fcgiwrap, php-fpm): php-fpm started
//! by the test with its own pool configuration in the test's directory, a
//! browser-like client (cookies, forms, multipart), a git repository made
//! by the test, and bounded waits for child processes.
//!
//! A required program that is missing fails the test with a message naming
//! the Debian package: nothing is skipped.

#![allow(dead_code)]

use crate::common::{php_fpm_binary, request, require, stop_master, Response, Server, TempDir};

pub mod mariadb;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Fixtures of these tests (the php-fpm template).
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/real-apps")
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

// ---------------------------------------------------------------------------
// php-fpm

/// How a test's php-fpm pool is set up.
pub struct FpmOptions {
    /// `pm.max_children` of the static pool.
    pub children: u32,
    /// `pm.max_requests` (0: never recycle).
    pub max_requests: u32,
    /// More pool lines.
    pub extra: String,
}

impl Default for FpmOptions {
    fn default() -> Self {
        FpmOptions {
            children: 4,
            max_requests: 0,
            extra: String::new(),
        }
    }
}

/// php-fpm run by the test from `tests/real-apps/php-fpm.conf.in`, its
/// socket, logs, sessions and temporary files in `DIR/fpm`. Stopped (by
/// PID, workers included) on drop.
pub struct PhpFpm {
    pub child: Child,
    pub sock: PathBuf,
    pub dir: PathBuf,
}

impl PhpFpm {
    pub fn start(dir: &TempDir, opts: FpmOptions) -> PhpFpm {
        let bin = php_fpm_binary();
        let fpm_dir = dir.mkdir("fpm");
        std::fs::create_dir_all(fpm_dir.join("sessions")).expect("mkdir sessions");
        std::fs::create_dir_all(fpm_dir.join("tmp")).expect("mkdir tmp");
        let template = std::fs::read_to_string(fixtures_dir().join("php-fpm.conf.in"))
            .expect("read tests/real-apps/php-fpm.conf.in");
        let conf = template
            .replace("@DIR@", &fpm_dir.display().to_string())
            .replace(
                "@USER@",
                if is_root() {
                    "user = root\ngroup = root"
                } else {
                    ""
                },
            )
            .replace("@CHILDREN@", &opts.children.to_string())
            .replace("@MAX_REQUESTS@", &opts.max_requests.to_string())
            .replace("@EXTRA@", &opts.extra);
        let conf_path = dir.write("fpm/php-fpm.conf", conf);
        let mut cmd = Command::new(&bin);
        cmd.arg("-F").arg("-y").arg(&conf_path);
        if is_root() {
            cmd.arg("-R");
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        let fpm = PhpFpm {
            child,
            sock: fpm_dir.join("php-fpm.sock"),
            dir: fpm_dir,
        };
        fpm.wait_listening();
        fpm
    }

    /// Waits up to 10 s for the socket to accept connections.
    pub fn wait_listening(&self) {
        let until = Instant::now() + Duration::from_secs(10);
        while UnixStream::connect(&self.sock).is_err() {
            assert!(
                Instant::now() < until,
                "php-fpm never listened on {}; its log:\n{}",
                self.sock.display(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// php-fpm's own log and PHP's error log.
    pub fn log(&self) -> String {
        let a = std::fs::read_to_string(self.dir.join("php-fpm.log")).unwrap_or_default();
        let b = std::fs::read_to_string(self.dir.join("php-errors.log")).unwrap_or_default();
        format!("{a}{b}")
    }

    /// `[[pool]]` lines for Stoa: php-fpm at its socket, `capacity` (its
    /// `pm.max_children`), and `extra` pool keys.
    pub fn pool(&self, name: &str, capacity: u32, extra: &str) -> String {
        format!(
            "[[pool]]\nname = \"{name}\"\naddress = [\"unix:{}\"]\ncapacity = {capacity}\n{extra}\n",
            self.sock.display()
        )
    }
}

impl Drop for PhpFpm {
    fn drop(&mut self) {
        stop_master(&mut self.child);
    }
}

/// The real uid of `pid` (the `Uid:` line of /proc/PID/status).
pub fn uid_of(pid: i32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// The command line of `pid`.
pub fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// Child processes with a deadline

/// Runs `cmd` to completion, killing it (by PID) past `within`. Returns
/// its output, or None when it had to be killed.
pub fn run_with_deadline(cmd: &mut Command, within: Duration) -> Option<Output> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    // Drain the pipes in threads so a chatty child cannot block on them.
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut v);
        v
    });
    let until = Instant::now() + within;
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break Some(st);
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    status.map(|status| Output {
        status,
        stdout,
        stderr,
    })
}

/// Runs a command that must succeed within 30 s; its stdout.
pub fn run(cmd: &mut Command) -> Vec<u8> {
    let shown = format!("{cmd:?}");
    let out = run_with_deadline(cmd, Duration::from_secs(30))
        .unwrap_or_else(|| panic!("{shown} took longer than 30 s"));
    assert!(
        out.status.success(),
        "{shown}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

// ---------------------------------------------------------------------------
// A git repository made by the test

/// Fixed identities and dates, so commits are the same on every run.
fn git(dir: &Path) -> Command {
    require("git", "git");
    let mut c = Command::new("git");
    c.current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Stoa Tester")
        .env("GIT_AUTHOR_EMAIL", "tester@example.org")
        .env("GIT_COMMITTER_NAME", "Stoa Tester")
        .env("GIT_COMMITTER_EMAIL", "tester@example.org")
        .env("GIT_AUTHOR_DATE", "2024-01-02T03:04:05Z")
        .env("GIT_COMMITTER_DATE", "2024-01-02T03:04:05Z");
    c
}

/// A bare repository `repos/NAME.git` under `dir` with two commits; returns
/// (path of the bare repository, id of the last commit).
pub fn make_repo(dir: &TempDir, name: &str) -> (PathBuf, String) {
    let work = dir.mkdir(&format!("work-{name}"));
    run(git(&work).args(["init", "-q", "-b", "main"]));
    dir.write(
        &format!("work-{name}/README"),
        "A repository made by Stoa's tests.\n",
    );
    dir.write(
        &format!("work-{name}/src/hello.c"),
        "int main(void) { return 0; }\n",
    );
    run(git(&work).args(["add", "."]));
    run(git(&work).args(["commit", "-q", "-m", "First commit"]));
    dir.write(
        &format!("work-{name}/src/hello.c"),
        "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n",
    );
    run(git(&work).args(["commit", "-q", "-a", "-m", "Say hello from the stoa test"]));
    let repos = dir.mkdir("repos");
    let bare = repos.join(format!("{name}.git"));
    run(git(dir.path()).args([
        "clone",
        "-q",
        "--bare",
        &work.display().to_string(),
        &bare.display().to_string(),
    ]));
    std::fs::write(bare.join("description"), "a repository made by the test\n")
        .expect("write description");
    let id = String::from_utf8_lossy(&run(git(&bare).args(["rev-parse", "HEAD"])))
        .trim()
        .to_owned();
    (bare, id)
}

/// `git archive` of `commit` in the bare repository `repo`.
pub fn git_archive(repo: &Path, args: &[&str]) -> Vec<u8> {
    run(git(repo).arg("archive").args(args))
}

/// `gzip -dc` of `data`.
pub fn gunzip(data: &[u8]) -> Vec<u8> {
    require("gzip", "gzip");
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn gzip");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let data = data.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = std::io::Write::write_all(&mut stdin, &data);
    });
    let out = child.wait_with_output().expect("gzip output");
    let _ = writer.join();
    assert!(
        out.status.success(),
        "gzip -dc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

// ---------------------------------------------------------------------------
// A browser-like client

/// Cookies a site set, sent back on later requests.
#[derive(Default, Debug)]
pub struct Browser {
    pub cookies: Vec<(String, String)>,
    /// Header lines sent with every request (`Authorization: Basic ...`).
    pub headers: Vec<String>,
}

impl Browser {
    pub fn new() -> Browser {
        Browser::default()
    }

    fn remember(&mut self, r: &Response) {
        for (n, v) in &r.headers {
            if !n.eq_ignore_ascii_case("set-cookie") {
                continue;
            }
            let pair = v.split(';').next().unwrap_or("");
            let Some((name, value)) = pair.split_once('=') else {
                continue;
            };
            let (name, value) = (name.trim().to_owned(), value.trim().to_owned());
            let expired = value.is_empty()
                || value == "deleted"
                || v.to_ascii_lowercase().contains("max-age=0")
                || v.contains("1970");
            self.cookies.retain(|(n, _)| *n != name);
            if !expired {
                self.cookies.push((name, value));
            }
        }
    }

    fn cookie_header(&self) -> Option<String> {
        (!self.cookies.is_empty()).then(|| {
            let pairs: Vec<String> = self
                .cookies
                .iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            format!("Cookie: {}", pairs.join("; "))
        })
    }

    /// One request on a fresh connection, with the cookies; remembers the
    /// ones the answer sets.
    pub fn send(
        &mut self,
        server: &Server,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Response {
        let mut headers: Vec<String> = self.headers.clone();
        if let Some(c) = self.cookie_header() {
            headers.push(c);
        }
        if let Some(ct) = content_type {
            headers.push(format!("Content-Type: {ct}"));
        }
        if method == "POST" || !body.is_empty() {
            headers.push(format!("Content-Length: {}", body.len()));
        }
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut bytes = request(method, path, &refs);
        bytes.extend_from_slice(body);
        let r = patient_request(server, &bytes);
        self.remember(&r);
        r
    }

    pub fn get(&mut self, server: &Server, path: &str) -> Response {
        self.send(server, "GET", path, None, b"")
    }

    /// A GET that follows redirects (at most 5) within the site.
    pub fn get_following(&mut self, server: &Server, path: &str) -> Response {
        let mut r = self.get(server, path);
        for _ in 0..5 {
            if !(300..400).contains(&r.status) {
                break;
            }
            let Some(loc) = r.header("location").map(local_path) else {
                break;
            };
            r = self.get(server, &loc);
        }
        r
    }

    /// A POST of an `application/x-www-form-urlencoded` form.
    pub fn post_form(&mut self, server: &Server, path: &str, fields: &[(&str, &str)]) -> Response {
        let body = form_urlencode(fields);
        self.send(
            server,
            "POST",
            path,
            Some("application/x-www-form-urlencoded"),
            body.as_bytes(),
        )
    }
}

/// The path and query of a `Location` (absolute or not).
pub fn local_path(location: &str) -> String {
    if let Some(rest) = location
        .strip_prefix("http://")
        .or_else(|| location.strip_prefix("https://"))
    {
        match rest.find('/') {
            Some(i) => rest[i..].to_owned(),
            None => "/".to_owned(),
        }
    } else {
        location.to_owned()
    }
}

/// Percent-encodes for a query or form value.
pub fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

pub fn form_urlencode(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(n, v)| format!("{}={}", urlencode(n), urlencode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Undoes the HTML escapes applications put in attribute values.
pub fn html_unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#039;", "'")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The value of attribute `name` in the tag text `tag`.
fn attr(tag: &str, name: &str) -> Option<String> {
    for quote in ['"', '\''] {
        let key = format!(" {name}={quote}");
        if let Some(i) = tag.find(&key) {
            let rest = &tag[i + key.len()..];
            let end = rest.find(quote)?;
            return Some(html_unescape(&rest[..end]));
        }
    }
    None
}

/// The named `<input>` and `<textarea>` fields of the first form after
/// `marker` in `html`, in document order (values unescaped).
pub fn form_fields(html: &str, marker: &str) -> Vec<(String, String)> {
    let Some(start) = html.find(marker) else {
        return Vec::new();
    };
    let form = &html[start..];
    let form = &form[..form.find("</form>").unwrap_or(form.len())];
    let mut fields = Vec::new();
    let mut rest = form;
    while let Some(i) = rest.find('<') {
        rest = &rest[i..];
        let end = rest.find('>').unwrap_or(rest.len());
        let tag = &rest[..end];
        if tag.starts_with("<input") {
            let ty = attr(tag, "type").unwrap_or_default();
            if let (Some(n), false) = (attr(tag, "name"), ty == "submit" || ty == "checkbox") {
                fields.push((n, attr(tag, "value").unwrap_or_default()));
            }
        } else if tag.starts_with("<textarea") {
            if let Some(n) = attr(tag, "name") {
                let body = &rest[end.saturating_add(1).min(rest.len())..];
                let close = body.find("</textarea>").unwrap_or(body.len());
                fields.push((n, html_unescape(&body[..close])));
            }
        }
        rest = &rest[end.min(rest.len())..];
        if rest.len() <= 1 {
            break;
        }
        rest = &rest[1..];
    }
    fields
}

/// The value of field `name` among `fields`.
pub fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

// ---------------------------------------------------------------------------
// Source disclosure

/// Spellings of DokuWiki's paths that must never give a PHP file's
/// source: trailing dots and spaces, case, NUL and newline tricks
/// (CVE-2019-11043), PATH_INFO, dot segments, the index, a static prefix
/// over PHP files (`/lib/tpl/`, see the test's config), backup-looking
/// names.
pub const DOKUWIKI_SPELLINGS: &[&str] = &[
    "/",
    "/doku.php.",
    "/doku.php..",
    "/DOKU.PHP",
    "/Doku.Php",
    "/doku.php%00.txt",
    "/doku.php%00",
    "/doku.php/",
    "/doku.php%20",
    "/doku.php%2e",
    "/doku%2ephp",
    "/x.php%0a.txt",
    "/doku.php%0a.txt",
    "/doku.php::$DATA",
    "/inc/../doku.php",
    "/lib/../doku.php",
    "//doku.php",
    "/./doku.php",
    "/index.php",
    "/index.php.",
    "/doku.phps",
    "/doku.php~",
    "/lib/exe/",
    "/lib/exe/fetch.php.",
    "/lib/exe/FETCH.PHP",
    "/lib/tpl/dokuwiki/main.php",
    "/lib/tpl/dokuwiki/main.php.",
    "/lib/tpl/dokuwiki/MAIN.PHP",
    "/lib/tpl/dokuwiki/",
    "/lib/tpl/dokuwiki/tpl_header.php",
    "/lib/tpl/../exe/fetch.php",
    "/inc/init.php",
    "/inc/init.php.",
    "/INC/init.php",
    "/vendor/autoload.php",
];

/// The same for Adminer, with a static alias (`/dist/`) over
/// /usr/share/adminer and `index = ["index.php"]`.
pub const ADMINER_SPELLINGS: &[&str] = &[
    "/",
    "/index.php.",
    "/index.php..",
    "/INDEX.PHP",
    "/Index.Php",
    "/index.php%00.txt",
    "/index.php%00",
    "/index.php/",
    "/index.php%20",
    "/index%2ephp",
    "/x.php%0a.txt",
    "/index.php%0a.txt",
    "/index.php::$DATA",
    "/dist/../index.php",
    "//index.php",
    "/index.phps",
    "/index.php~",
    "/dist/",
    "/dist/adminer.php",
    "/dist/adminer.php.",
    "/dist/ADMINER.PHP",
    "/dist/adminer.php%00.txt",
    "/dist/adminer/",
    "/dist/adminer/index.php",
    "/dist/adminer/include/bootstrap.inc.php",
    "/dist/adminer/drivers/sqlite.inc.php.",
    "/dist/plugins/plugin.php",
    "/dist/plugins/login-password-less.php",
    "/dist/compile.php",
    "/dist/editor.php",
];

/// GETs each path and fails if any answer holds `<?php` (a PHP file's
/// source), naming every path that did.
pub fn assert_no_source(server: &Server, paths: &[&str]) {
    let mut leaks = Vec::new();
    for &path in paths {
        let r = server.get(path);
        if crate::common::contains(&r.body, b"<?php") {
            leaks.push(format!("{path} ({})", r.status));
        }
    }
    assert!(leaks.is_empty(), "PHP source served for: {leaks:?}");
}

// ---------------------------------------------------------------------------
// Debian packages a test needs, HTTP/2 through curl, and a log of the
// requests that reached PHP

/// Whether every `(file, package)` is present. When some are missing and
/// the test does not run as root, prints which and how to get them and
/// returns false, and the caller returns: a developer's unprivileged run
/// skips. As root (CI, `sudo ./test.sh`, which installs them from
/// `apt_pkgs`) a missing package fails the test.
pub fn packages_or_skip(test: &str, needs: &[(&str, &str)]) -> bool {
    let missing: Vec<&str> = needs
        .iter()
        .filter(|(file, _)| !Path::new(file).exists())
        .map(|&(_, package)| package)
        .collect();
    if missing.is_empty() {
        return true;
    }
    let list = missing.join(" ");
    assert!(
        !is_root(),
        "{test}: missing Debian packages {list} (apt-get install {list}); test.sh installs them when run as root"
    );
    eprintln!(
        "SKIPPED {test}: needs the Debian packages {list} (apt-get install {list}, or run ./test.sh as root)"
    );
    false
}

/// A PHP file for php-fpm's `auto_prepend_file`: it appends each request's
/// `REQUEST_URI` to `log` before the script runs (so once a response is in
/// hand, the line of a request that reached PHP is already written), then
/// runs `php` (defines the application reads first).
pub fn php_request_log_prepend(dir: &TempDir, log: &Path, php: &str) -> PathBuf {
    dir.write(
        "prepend.php",
        format!(
            "<?php\n// Written by Stoa's test: which requests reached PHP.\n\
             file_put_contents({:?}, ($_SERVER['REQUEST_URI'] ?? '-') . \"\\n\", FILE_APPEND | LOCK_EX);\n{php}\n",
            log.display().to_string()
        ),
    )
}

/// The request URIs that reached PHP so far (see [`php_request_log_prepend`]).
pub fn php_requests(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A GET over HTTP/2 with prior knowledge (h2c, RFC 9113 §3.3) by curl,
/// with extra request header lines (`"Name: value"`); the body as it
/// came (not decoded).
pub fn curl_h2c_get(server: &Server, path: &str, headers: &[&str]) -> Response {
    require("curl", "curl");
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-i", "--max-time", "30", "--http2-prior-knowledge"]);
    cmd.args(["-H", "Host: t"]);
    for h in headers {
        cmd.args(["-H", h]);
    }
    cmd.arg(format!("http://{}{path}", server.addr));
    let out = run_with_deadline(&mut cmd, Duration::from_secs(40))
        .unwrap_or_else(|| panic!("curl --http2-prior-knowledge {path} took longer than 40 s"));
    assert!(
        out.status.success(),
        "curl {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = out.stdout;
    let end = crate::common::find(&raw, b"\r\n\r\n").unwrap_or_else(|| {
        panic!(
            "curl {path}: no head in {:?}",
            String::from_utf8_lossy(&raw)
        )
    });
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split_whitespace();
    let version = parts.next().unwrap_or_default().to_owned();
    let status = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Response {
        version,
        status,
        reason: String::new(),
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

/// The `toml` block after `<!-- tested: NAME -->` in docs/NGINX.md: the
/// configuration the guide gives, run as written by the tests.
pub fn nginx_md_config(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/NGINX.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let marker = format!("<!-- tested: {name} -->");
    let at = text
        .find(&marker)
        .unwrap_or_else(|| panic!("docs/NGINX.md has no {marker}"));
    let rest = &text[at + marker.len()..];
    let start = rest
        .find("```toml\n")
        .unwrap_or_else(|| panic!("no ```toml block after {marker}"))
        + "```toml\n".len();
    let len = rest[start..]
        .find("```")
        .unwrap_or_else(|| panic!("the block after {marker} does not end"));
    rest[start..start + len].to_owned()
}

/// How long one read of a real application's answer may take: the common
/// client's 5 s is for Stoa's own answers, and an application installing
/// beside other tests on a loaded two-core machine can take longer.
pub const APP_TIMEOUT: Duration = Duration::from_secs(60);

/// `Server::request` with [`APP_TIMEOUT`] for each read.
pub fn patient_request(server: &Server, bytes: &[u8]) -> Response {
    let mut c = server.connect();
    c.stream
        .set_read_timeout(Some(APP_TIMEOUT))
        .expect("set the read timeout");
    c.request(bytes)
}

/// `Server::get` with [`APP_TIMEOUT`] for each read.
pub fn patient_get(server: &Server, path: &str) -> Response {
    patient_request(server, &crate::common::get(path))
}
