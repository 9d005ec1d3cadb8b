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

/// The subcommands a user sees in `stoa --help`, each of which the manual
/// pages and completions must know.
const SUBCOMMANDS: [&str; 7] = [
    "serve",
    "cert",
    "bench",
    "check",
    "demo-app",
    "man",
    "completions",
];

/// stoa(1) in roff (man-pages(7): title line, NAME, SYNOPSIS,
/// DESCRIPTION, then the sections a daemon's page has: SIGNALS, FILES,
/// ENVIRONMENT, EXIT STATUS, SEE ALSO), each subcommand named as its own
/// page, stoa-serve(1) and so on.
#[test]
fn man_prints_a_roff_page_that_names_every_subcommand_and_the_signals() {
    let o = stoa(&["man"]);
    assert!(o.status.success(), "{}", text(&o));
    let page = String::from_utf8_lossy(&o.stdout);
    assert!(page.contains(".TH stoa 1 "), "no title line: {page}");
    for section in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "SUBCOMMANDS",
        "SIGNALS",
        "FILES",
        "ENVIRONMENT",
        "\"EXIT STATUS\"",
        "\"SEE ALSO\"",
    ] {
        assert!(
            page.contains(&format!(".SH {section}\n")),
            "no {section} in {page}"
        );
    }
    for sub in SUBCOMMANDS {
        // roff escapes the hyphen of "stoa-serve(1)".
        let name = format!("stoa\\-{}(1)", sub.replace('-', "\\-"));
        assert!(page.contains(&name), "{name} is not in {page}");
    }
    for signal in ["SIGHUP", "SIGQUIT", "SIGTERM", "SIGUSR1"] {
        assert!(page.contains(signal), "{signal} is not in {page}");
    }
    assert!(page.contains("/etc/stoa/stoa.toml"), "{page}");
}

/// `stoa man --dir` writes the whole set: stoa.1 and one page per
/// subcommand; stoa-bench(1) comes from the load generator's own help
/// (its options are not clap's) with its options kept.
#[test]
fn man_dir_writes_a_page_per_subcommand_and_stoa_bench_has_its_own_options() {
    let d = TempDir::new("cli-man-dir");
    let dir = d.join("man1");
    let o = stoa(&["man", "--dir", dir.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", text(&o));
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("the pages' directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut expected: Vec<String> = SUBCOMMANDS
        .iter()
        .map(|s| format!("stoa-{s}.1"))
        .chain(["stoa.1".to_string()])
        .collect();
    expected.sort();
    assert_eq!(files, expected);
    let serve = std::fs::read_to_string(dir.join("stoa-serve.1")).expect("stoa-serve.1");
    assert!(serve.contains(".TH stoa-serve 1 "), "{serve}");
    assert!(serve.contains("\\-\\-config"), "{serve}");
    let bench = std::fs::read_to_string(dir.join("stoa-bench.1")).expect("stoa-bench.1");
    assert!(bench.contains(".TH stoa-bench 1 "), "{bench}");
    for want in [
        ".SH SYNOPSIS",
        ".SH \"WRK OPTIONS\"",
        "\\-\\-scenario FILE",
        "\\-\\-latency",
    ] {
        assert!(bench.contains(want), "{want} is not in {bench}");
    }
    // One copy of the roff preamble per page, at the top.
    assert_eq!(serve.matches(".ds Aq").count(), 2, "{serve}");
}

/// Completion scripts (clap_complete) for the three shells the Debian
/// package installs them for: non-empty, naming every subcommand; the
/// bash one parses (`bash -n`).
#[test]
fn completions_for_bash_zsh_and_fish_name_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let o = stoa(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", text(&o));
        let script = String::from_utf8_lossy(&o.stdout);
        assert!(script.len() > 1000, "{shell}: {script}");
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell}: {sub} is not in {script}");
        }
        if shell == "bash" {
            let d = TempDir::new("cli-completions");
            let f = d.write("stoa.bash", script.as_bytes());
            let check = Command::new("bash")
                .arg("-n")
                .arg(&f)
                .output()
                .expect("run bash");
            assert!(check.status.success(), "bash -n: {}", text(&check));
        }
    }
    let o = stoa(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// packaging/stoa.toml, the Debian package's /etc/stoa/stoa.toml, passes
/// `stoa check` as it is and with every commented example ("#key = ..."
/// and "#[[table]]" lines) uncommented: TLS, https_redirect and HSTS, a
/// PHP site on php-fpm, an HTTP application behind the proxy. Its paths are
/// moved under a temporary directory (with a certificate where certbot
/// would put one); `user = "www-data"` stays (Debian has it).
#[test]
fn the_packaged_configuration_and_all_its_commented_examples_pass_check() {
    let packaged = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging/stoa.toml"),
    )
    .expect("packaging/stoa.toml");
    let d = TempDir::new("cli-packaged-config");
    for dir in ["html", "blog", "log"] {
        d.mkdir(dir);
    }
    let o = stoa(&["cert", d.join("le").to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::rename(d.join("le/cert.pem"), d.join("le/fullchain.pem")).expect("rename");
    std::fs::rename(d.join("le/key.pem"), d.join("le/privkey.pem")).expect("rename");
    let base = d.path().to_str().expect("utf-8");
    let moved = packaged
        .replace("/var/www/html", &format!("{base}/html"))
        .replace("/var/www/blog", &format!("{base}/blog"))
        .replace("/var/log/stoa", &format!("{base}/log"))
        .replace("/etc/letsencrypt/live/example.org", &format!("{base}/le"));
    let cfg = d.write("stoa.toml", &moved);
    let o = stoa(&["check", cfg.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("ok (1 site(s)"), "{}", text(&o));

    let uncommented: String = moved
        .lines()
        .map(|l| match l.strip_prefix('#') {
            Some(rest)
                if rest.starts_with('[')
                    || rest.split_once('=').is_some_and(|(k, _)| {
                        k.trim().chars().all(|c| c.is_ascii_lowercase() || c == '_')
                    }) =>
            {
                rest
            }
            _ => l,
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let all = d.write("all.toml", &uncommented);
    let o = stoa(&["check", all.to_str().expect("utf-8")]);
    assert!(o.status.success(), "{uncommented}\n{}", text(&o));
    // Every example took effect: three sites, and TLS on 443.
    let t = text(&o);
    assert!(t.contains("ok (3 site(s)"), "{t}");
    assert!(t.contains(":443 (TLS)"), "{t}");
}

/// A second `stoa serve` on an address the first one listens on fails to
/// start, as nginx does ("bind() ... failed (98: Address already in use)"),
/// instead of joining the first one's SO_REUSEPORT group and taking part
/// of its connections unseen; the first one goes on serving.
#[test]
fn a_second_server_on_a_taken_address_refuses_to_start_as_nginx_does() {
    let dir = common::TempDir::new("taken");
    dir.write("www/index.html", "first\n");
    let first = common::Server::serve_dir(&dir.join("www"));
    let addr = first.addr.to_string();
    let second = common::Server::try_spawn([
        "serve",
        dir.join("www").to_str().expect("utf-8 path"),
        "--listen",
        &addr,
        "--workers",
        "1",
        "--access-log",
        "off",
    ]);
    let err = match second {
        Ok(_) => panic!("a second server started on {addr}"),
        Err(e) => e,
    };
    assert!(
        err.contains(&format!("cannot listen on {addr}")) && err.contains("in use"),
        "{err}"
    );
    assert!(first.get("/index.html").text().contains("first"));
}
