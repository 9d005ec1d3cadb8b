//! The command line: `--version`, `--help`, `check`, and `serve DIR`.

mod common;
use common::*;
use std::process::{Command, Output};

fn stoa(args: &[&str]) -> Output {
    Command::new(stoa_bin())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run stoa")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn version_prints_the_crate_version() {
    let o = stoa(&["--version"]);
    assert!(o.status.success());
    let t = text(&o);
    assert!(t.starts_with("stoa "), "{t}");
    assert!(t.contains(env!("CARGO_PKG_VERSION")), "{t}");
}

#[test]
fn help_lists_serve_and_check() {
    let o = stoa(&["--help"]);
    assert!(o.status.success());
    let t = text(&o);
    assert!(t.contains("serve"), "{t}");
    assert!(t.contains("check"), "{t}");
    let o = stoa(&["serve", "--help"]);
    assert!(o.status.success());
    let t = text(&o);
    for flag in ["--listen", "--config", "--workers", "--access-log"] {
        assert!(t.contains(flag), "serve --help lacks {flag}: {t}");
    }
}

#[test]
fn an_unknown_subcommand_fails_with_usage() {
    let o = stoa(&["frobnicate"]);
    assert!(!o.status.success());
    assert!(text(&o).to_lowercase().contains("usage"), "{}", text(&o));
}

#[test]
fn check_accepts_a_valid_file_and_exits_0() {
    let d = TempDir::new("cli-check-ok");
    d.mkdir("www");
    d.mkdir("pub");
    let cfg = d.config(
        "stoa.toml",
        "[limits]\nheader_timeout = \"5s\"\nmax_body_bytes = \"1 MiB\"\n\n\
         [cache]\nmax_file_bytes = \"64 KiB\"\n\n\
         [[site]]\nhosts = [\"example.com\", \"*.example.org\"]\nroot = \"www\"\n\
         index = [\"index.html\", \"index.htm\"]\n\n\
         [[site.route]]\nprefix = \"/pub/\"\nstatic = { root = \"pub\", autoindex = true }\n\n\
         [[site.route]]\nsuffix = \".txt\"\nstatic = { index = [\"a.txt\"] }\n",
    );
    let o = stoa(&["check", cfg.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("ok"), "{}", text(&o));
}

/// A route that can never be chosen (same matcher as an earlier one) is
/// reported by `check`, which still accepts the file.
#[test]
fn check_warns_about_a_route_shadowed_by_an_earlier_one() {
    let d = TempDir::new("cli-check-shadow");
    d.mkdir("www");
    let cfg = d.config(
        "stoa.toml",
        "[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/a/\"\ndeny = true\n\n\
         [[site.route]]\nprefix = \"/a/\"\nstatic = {}\n",
    );
    let o = stoa(&["check", cfg.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("warning:") && t.contains("site[0].route[1]: never used"),
        "{t}"
    );
}

#[test]
fn check_reports_an_unknown_key_with_file_line_and_key_and_exits_1() {
    let d = TempDir::new("cli-check-bad");
    d.mkdir("www");
    // Line 4 holds the unknown key.
    let cfg = d.write(
        "stoa.toml",
        "listen = [\"127.0.0.1:0\"]\n[limits]\nheader_timeout = \"5s\"\nheader_timout = \"5s\"\n\n[[site]]\nroot = \"www\"\n",
    );
    let o = stoa(&["check", cfg.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("stoa.toml:4"), "no file:line in {t}");
    assert!(t.contains("header_timout"), "the key is not named in {t}");
}

#[test]
fn check_reports_a_bad_value_with_its_line() {
    let d = TempDir::new("cli-check-value");
    d.mkdir("www");
    let cfg = d.write(
        "stoa.toml",
        "[limits]\n\nkeepalive_timeout = \"ten seconds\"\n\n[[site]]\nroot = \"www\"\n",
    );
    let o = stoa(&["check", cfg.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1));
    let t = text(&o);
    assert!(t.contains("stoa.toml:3"), "no file:line in {t}");
}

#[test]
fn check_reports_a_missing_root_with_the_key() {
    let d = TempDir::new("cli-check-root");
    let cfg = d.write("stoa.toml", "[[site]]\nroot = \"does-not-exist\"\n");
    let o = stoa(&["check", cfg.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1));
    let t = text(&o);
    assert!(t.contains("stoa.toml:2"), "{t}");
    assert!(t.contains("root"), "{t}");
}

#[test]
fn check_on_a_missing_file_fails() {
    let d = TempDir::new("cli-check-missing");
    let o = stoa(&["check", d.join("nope.toml").to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("nope.toml"), "{}", text(&o));
}

#[test]
fn serve_dir_without_a_config_serves_the_directory() {
    let d = TempDir::new("cli-serve");
    d.write("hello.txt", "hi\n");
    // No --workers, no --access-log: the plain defaults.
    let s = Server::spawn([
        std::ffi::OsStr::new("serve"),
        d.path().as_os_str(),
        std::ffi::OsStr::new("--listen"),
        std::ffi::OsStr::new("127.0.0.1:0"),
    ]);
    let r = s.get("/hello.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hi\n");
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
}

#[test]
fn serve_dir_overrides_the_root_of_the_config() {
    let d = TempDir::new("cli-serve-override");
    d.write("www/page.txt", "from config root\n");
    d.write("other/page.txt", "from the command line\n");
    let cfg = d.config("stoa.toml", "[[site]]\nroot = \"www\"\n");
    let s = Server::spawn([
        std::ffi::OsStr::new("serve"),
        d.join("other").as_os_str(),
        std::ffi::OsStr::new("--config"),
        cfg.as_os_str(),
    ]);
    assert_eq!(s.get("/page.txt").body, b"from the command line\n");
}

#[test]
fn serve_of_a_missing_directory_fails_with_a_message() {
    let d = TempDir::new("cli-serve-missing");
    let missing = d.join("nope");
    let o = stoa(&[
        "serve",
        missing.to_str().expect("utf-8"),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("nope"), "{}", text(&o));
}

#[test]
fn serve_with_an_unusable_listen_address_fails_with_a_message() {
    let d = TempDir::new("cli-serve-badlisten");
    let o = stoa(&[
        "serve",
        d.path().to_str().expect("utf-8"),
        "--listen",
        "not-an-address",
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("not-an-address"), "{}", text(&o));
}

#[test]
fn the_access_log_records_requests_in_combined_log_format() {
    let d = TempDir::new("cli-access-log");
    d.write("www/a.txt", "alpha\n");
    let log = d.join("access.log");
    let s = Server::spawn([
        std::ffi::OsStr::new("serve"),
        d.join("www").as_os_str(),
        std::ffi::OsStr::new("--listen"),
        std::ffi::OsStr::new("127.0.0.1:0"),
        std::ffi::OsStr::new("--workers"),
        std::ffi::OsStr::new("1"),
        std::ffi::OsStr::new("--access-log"),
        log.as_os_str(),
    ]);
    let r = s.request(&request(
        "GET",
        "/a.txt?q=1",
        &["User-Agent: tester/1.0", "Referer: http://ref/"],
    ));
    assert_eq!(r.status, 200);
    // Lines are flushed about once a second.
    let t0 = std::time::Instant::now();
    let line = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| l.contains("/a.txt?q=1")) {
            break l.to_owned();
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(4),
            "no access log line: {text:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(line.starts_with("127.0.0.1 - - ["), "{line}");
    assert!(
        line.contains("\"GET /a.txt?q=1 HTTP/1.1\" 200 6 \"http://ref/\" \"tester/1.0\""),
        "{line}"
    );
}

/// Bare `stoa serve` runs `demo/stoa.toml` of the current directory (a
/// source checkout) and nothing else: outside one, it never falls back to
/// a path of the machine the binary was built on, and says what to run
/// instead (exit 2, a usage error as clap's).
#[test]
fn bare_serve_outside_a_checkout_says_what_to_do_instead_of_using_a_build_path() {
    let d = TempDir::new("cli-bare-serve");
    let o = Command::new(stoa_bin())
        .arg("serve")
        .current_dir(d.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("run stoa");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("stoa serve DIR"), "{t}");
    assert!(t.contains("--config FILE"), "{t}");
    assert!(!t.contains(env!("CARGO_MANIFEST_DIR")), "{t}");
}
