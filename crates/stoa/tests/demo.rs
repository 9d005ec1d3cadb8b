//! The demo (`demo/stoa.toml`, what `cargo run --release -- serve` runs):
//! every route it shows works, run from a copy of `demo/` in a temporary
//! directory so the comments database is made there, not in the tree.

mod common;
use common::*;
use std::ffi::OsStr;
use std::path::Path;

/// Copies `from` into `to`, keeping permissions (the CGI script stays
/// executable) and leaving out a comments database a local run made.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read demo dir") {
        let entry = entry.expect("dir entry");
        let name = entry.file_name();
        let n = name.to_string_lossy();
        // What the demo writes when it runs (its databases, its
        // self-signed certificate; all in .gitignore) stays behind, so a
        // copy starts as a fresh clone does even after `cargo run -- serve`.
        if n.starts_with("comments.db") || n.starts_with("lua-comments.db") || n == "certs" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type().expect("file type").is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).expect("copy");
        }
    }
}

fn repo_demo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../demo")
}

/// A running demo: the server and the directory it serves from.
struct Demo {
    server: Server,
    dir: TempDir,
}

impl std::ops::Deref for Demo {
    type Target = Server;
    fn deref(&self) -> &Server {
        &self.server
    }
}

impl Drop for Demo {
    /// Stops the server with SIGTERM, which stops its pools' processes
    /// before it exits; the harness kills it if that takes too long.
    fn drop(&mut self) {
        self.server.signal(libc::SIGTERM);
        let _ = self.server.wait_exit(std::time::Duration::from_secs(15));
    }
}

/// `stoa serve --config COPY/demo/stoa.toml` on ephemeral ports, the file
/// unchanged but for its TLS port; the flags only move the cleartext
/// listener and quiet the access log.
/// Returns once every pool process runs: a server stopped while it is
/// still spawning one could leave that process behind.
fn demo(tag: &str) -> Demo {
    let dir = TempDir::new(tag);
    copy_tree(&repo_demo(), &dir.join("demo"));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // Started as root, Stoa runs the demo as `nobody` (it sets no
        // `user`): give nobody the directory, as an operator gives the
        // server's user its data directory, so the database goes there.
        let id = |flag: &str| -> u32 {
            let o = std::process::Command::new("id")
                .args([flag, "nobody"])
                .output()
                .expect("run id");
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse()
                .expect("an id")
        };
        std::os::unix::fs::chown(dir.join("demo"), Some(id("-u")), Some(id("-g")))
            .expect("chown the demo copy to nobody");
    }
    let cfg = dir.join("demo/stoa.toml");
    // The TLS port is the file's own (8443), which tests running side by
    // side cannot share: an ephemeral one instead.
    let text = std::fs::read_to_string(&cfg).expect("read the demo config");
    assert!(
        text.contains("\"127.0.0.1:8443\""),
        "the demo has no TLS listener"
    );
    std::fs::write(&cfg, text.replace("\"127.0.0.1:8443\"", "\"127.0.0.1:0\"")).expect("write");
    let server = Server::spawn([
        OsStr::new("serve"),
        OsStr::new("--config"),
        cfg.as_os_str(),
        OsStr::new("--listen"),
        OsStr::new("127.0.0.1:0"),
        OsStr::new("--workers"),
        OsStr::new("1"),
        OsStr::new("--access-log"),
        OsStr::new("off"),
    ]);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let status = pools(&server);
        let running = |p: &serde_json::Value| {
            p["processes"]
                .as_array()
                .is_some_and(|ps| ps.iter().all(|c| c["state"] == "running"))
        };
        if status.len() == 2 && status.iter().all(running) {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "pools not running: {status:?}\n{}",
            server.stderr()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Demo { server, dir }
}

/// The `pools` of the status page (JSON).
fn pools(s: &Server) -> Vec<serde_json::Value> {
    let r = s.get("/stoa-status?format=json");
    assert_eq!(r.status, 200, "{}", r.text());
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
    v["pools"].as_array().cloned().unwrap_or_default()
}

fn post_form(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\n\
         Content-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[test]
fn the_demo_config_in_the_repository_passes_check() {
    let o = std::process::Command::new(stoa_bin())
        .arg("check")
        .arg(repo_demo().join("stoa.toml"))
        .output()
        .expect("run stoa check");
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    assert!(!text.contains("warning"), "{text}");
}

#[test]
fn the_index_page_links_to_every_route_and_static_files_are_served() {
    let s = demo("demo-index");
    let r = s.get("/");
    assert_eq!(r.status, 200);
    let page = r.text();
    for link in [
        "href=\"style.css\"",
        "href=\"docs/\"",
        "href=\"cgi-bin/hello.sh",
        "href=\"comments/\"",
        "href=\"lua-comments/\"",
        "href=\"private/\"",
        "href=\"stoa-status\"",
    ] {
        assert!(page.contains(link), "index lacks {link}");
    }
    let css = s.get("/style.css");
    assert_eq!(css.status, 200);
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    assert_eq!(s.get("/docs/").status, 200);
}

#[test]
fn a_posted_comment_is_answered_303_and_read_back_escaped_from_a_database_in_the_pool_directory() {
    let s = demo("demo-comments");
    let r = s.get("/comments/");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(r.text().contains("<form method=\"post\""), "{}", r.text());
    assert!(r.text().contains("No comments yet"), "{}", r.text());
    // The pool's env names comments.db, relative to its working directory:
    // the config's directory.
    assert!(s.dir.join("demo/comments.db").is_file(), "no database made");

    let r = s.request(&post_form(
        "/comments/",
        "name=Mallory+%26+co&comment=%3Cscript%3Ealert(%22hi%22)%3C%2Fscript%3E",
    ));
    assert_eq!(r.status, 303, "{}", r.text());
    assert_eq!(r.header("location"), Some("/comments/"));

    let page = s.get("/comments/").text();
    assert!(page.contains("<strong>Mallory &amp; co</strong>"), "{page}");
    assert!(
        page.contains("&lt;script&gt;alert(&quot;hi&quot;)&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains("<script>"), "unescaped: {page}");
    assert!(page.contains("<h2>1 comment</h2>"), "{page}");
}

#[test]
fn comments_that_are_empty_too_long_or_not_a_form_are_refused_and_not_stored() {
    let s = demo("demo-comments-bad");
    assert_eq!(
        s.request(&post_form("/comments/", "name=a&comment="))
            .status,
        400
    );
    let long = format!("name=a&comment={}", "x".repeat(2001));
    assert_eq!(s.request(&post_form("/comments/", &long)).status, 413);
    // Larger than the application takes at all (32 KiB).
    let huge = format!("name=a&comment={}", "x".repeat(40_000));
    assert_eq!(s.request(&post_form("/comments/", &huge)).status, 413);
    let r = s.request(
        b"POST /comments/ HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n\
          Content-Length: 16\r\n\r\nname=a&comment=b",
    );
    assert_eq!(r.status, 415);
    assert!(s.get("/comments/").text().contains("No comments yet"));
}

#[test]
fn the_private_page_needs_basic_demo_demo_from_the_authorizer() {
    let s = demo("demo-private");
    let r = s.get("/private/");
    assert_eq!(r.status, 401);
    let challenge = r.header("www-authenticate").unwrap_or_default();
    assert!(challenge.starts_with("Basic realm="), "{challenge}");
    assert!(!r.text().contains("You are in"), "{}", r.text());

    // demo:wrong
    let r = s.request(&request(
        "GET",
        "/private/",
        &["Authorization: Basic ZGVtbzp3cm9uZw=="],
    ));
    assert_eq!(r.status, 401);

    // demo:demo
    let r = s.request(&request(
        "GET",
        "/private/",
        &["Authorization: Basic ZGVtbzpkZW1v"],
    ));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("You are in"), "{}", r.text());
}

#[test]
fn the_cgi_script_reports_its_path_and_query() {
    let s = demo("demo-cgi");
    let r = s.get("/cgi-bin/hello.sh/some/path?x=1");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.text(),
        "Hello from CGI. You asked for /cgi-bin/hello.sh/some/path with query \"x=1\".\n"
    );
}

#[test]
fn the_status_page_lists_both_demo_pools() {
    let s = demo("demo-status");
    // Both pools are listed, each with its running process. (How many
    // requests a process served is not asserted: the count moves after
    // the response is written, so it races with the next request.)
    assert_eq!(s.get("/comments/").status, 200);
    let pools = pools(&s);
    let names: Vec<&str> = pools.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["comments", "demo-auth"], "{pools:?}");
    for p in &pools {
        assert!(p["processes"][0]["pid"].as_u64().is_some(), "{pools:?}");
    }
    let text = s.get("/stoa-status");
    assert_eq!(text.status, 200);
    assert!(text.text().contains("pool demo-auth"), "{}", text.text());
}

#[test]
fn the_demo_serves_https_and_http2_with_a_self_signed_certificate_it_writes_on_first_start() {
    require("curl", "curl");
    let s = demo("demo-https");
    let cert = s.dir.join("demo/certs/cert.pem");
    assert!(cert.is_file(), "no certificate written");
    assert!(
        s.wait_stderr(
            0,
            "wrote a self-signed certificate",
            std::time::Duration::from_secs(10)
        ),
        "{}",
        s.stderr()
    );
    assert!(s.wait_stderr(
        0,
        "listening on https://",
        std::time::Duration::from_secs(5)
    ));
    let port = s
        .stderr()
        .lines()
        .find_map(|l| l.split("listening on https://127.0.0.1:").nth(1))
        .and_then(|p| p.trim().trim_end_matches('/').parse::<u16>().ok())
        .expect("the TLS port");
    for (proto, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "10", proto, "--cacert"])
            .arg(&cert)
            .args(["-o", "/dev/null", "-w", "%{http_code} %{http_version}"])
            .arg(format!("https://localhost:{port}/"))
            .output()
            .expect("curl");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("200 {version}"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The seeds' comments form (Figure 1) as a Lua handler on SQLite: a
/// POST stored, a page listing every comment, escaped; the script's
/// connection and the shared visit counter kept across requests.
#[test]
fn issue_13_the_lua_comments_form_stores_a_post_in_sqlite_and_lists_it() {
    let s = demo("demo-lua-comments");
    let r = s.get("/lua-comments/");
    assert_eq!(r.status, 200, "{}\n{}", r.text(), s.server.stderr());
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(r.text().contains("<form method=\"post\""), "{}", r.text());
    assert!(r.text().contains("No comments yet"), "{}", r.text());
    assert!(
        s.dir.join("demo/lua-comments.db").is_file(),
        "no database made"
    );

    let r = s.request(&post_form(
        "/lua-comments/",
        "name=Mallory+%26+co&comment=%3Cscript%3Ealert(%22hi%22)%3C%2Fscript%3E",
    ));
    assert_eq!(r.status, 303, "{}\n{}", r.text(), s.server.stderr());
    assert_eq!(r.header("location"), Some("/lua-comments/"));
    assert_eq!(
        s.request(&post_form("/lua-comments/", "name=ada&comment=caf%C3%A9"))
            .status,
        303
    );
    assert_eq!(
        s.request(&post_form("/lua-comments/", "name=a&comment=+"))
            .status,
        400
    );
    let long = format!("name=a&comment={}", "x".repeat(2001));
    assert_eq!(s.request(&post_form("/lua-comments/", &long)).status, 413);

    let page = s.get("/lua-comments/").text();
    assert!(page.contains("<h2>2 comments</h2>"), "{page}");
    assert!(page.contains("<strong>Mallory &amp; co</strong>"), "{page}");
    assert!(
        page.contains("&lt;script&gt;alert(&quot;hi&quot;)&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains("<script>"), "unescaped: {page}");
    // Newest first.
    assert!(
        page.find("café").unwrap() < page.find("Mallory").unwrap(),
        "{page}"
    );
    assert!(page.contains("shown 2 times"), "{page}");
}
