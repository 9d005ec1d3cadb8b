//! What a route itself answers or bounds, end to end: `redirect` and
//! `respond` routes (nginx `return`, Caddy `redir` / `respond`) over
//! HTTP/1 and HTTP/2, `regex` routes narrowing a PHP application by
//! extension (nginx's `location ~* \.(css|js)$`), per-route
//! `max_body_bytes` (nginx `client_max_body_size` in a `location`),
//! `timeout` and `default_type`, and `stoa check`'s warning for a route
//! that can never be chosen. The routing order itself is unit-tested in
//! the server crate (config::tests, route::tests).
//!
//! Needs the Debian packages curl (with nghttp2) and php-cgi.

mod common;

use common::*;
use std::net::SocketAddr;
use std::process::Command;

/// `curl --http2-prior-knowledge -i`: (status, head, body), the head's
/// field names lowercase as HTTP/2 sends them.
fn curl_h2c(addr: SocketAddr, path: &str, extra: &[&str]) -> (u16, String, Vec<u8>) {
    require("curl", "curl");
    let out = Command::new("curl")
        .args(["-sS", "-i", "--max-time", "10", "--http2-prior-knowledge"])
        .args(extra)
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("run curl");
    let s = out.stdout;
    let cut = find(&s, b"\r\n\r\n").map_or(s.len(), |i| i + 4);
    let head = String::from_utf8_lossy(&s[..cut]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head, s[cut..].to_vec())
}

/// The value of `name` in a head as curl prints it.
fn field<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn executable(dir: &TempDir, rel: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.write(rel, text);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A site of redirects and fixed answers.
fn answers_site(tag: &str) -> (TempDir, Server) {
    let dir = TempDir::new(tag);
    dir.write("www/index.html", "home\n");
    let cfg = dir.config(
        "stoa.toml",
        "[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nregex = '^/old/(.+)\\.html$'\n\
         redirect = { to = \"/new/$1$is_args$args\", status = 301 }\n\n\
         [[site.route]]\nprefix = \"/moved/\"\n\
         redirect = { to = \"$scheme://$http_host/elsewhere$request_uri\", status = 308 }\n\n\
         [[site.route]]\nprefix = \"/to-host/\"\nredirect = { to = \"https://$host$uri\" }\n\n\
         [[site.route]]\nprefix = \"/gone\"\n\
         respond = { status = 410, body = \"gone for good\\n\" }\n\n\
         [[site.route]]\nprefix = \"/missing\"\nrespond = { status = 404 }\n\n\
         [[site.route]]\nprefix = \"/robots.txt\"\n\
         respond = { body = \"User-agent: *\\nDisallow: /\\n\", content_type = \"text/plain\" }\n",
    );
    let server = Server::with_config(&cfg);
    (dir, server)
}

/// nginx `return 301 /new/$1$is_args$args;` in a regex location: the
/// capture comes from the decoded path and is encoded again; the query
/// follows. `$http_host` keeps the port (nginx), `$host` does not.
#[test]
fn a_redirect_route_builds_its_location_from_the_request_on_http1() {
    let (_d, s) = answers_site("rr-redirect-h1");
    let r = s.get("/old/a%20b.html?x=1&y=2");
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(r.header("location"), Some("/new/a%20b?x=1&y=2"));
    assert!(r.text().contains("301"), "a short hypertext note: {r:?}");
    let r = s.get("/old/c.html");
    assert_eq!(r.header("location"), Some("/new/c"));

    let r = s.get("/moved/p?q");
    assert_eq!(r.status, 308);
    // `Server::get` sends `Host: t`.
    assert_eq!(r.header("location"), Some("http://t/elsewhere/moved/p?q"));
    let r = s.request(b"GET /moved/p HTTP/1.1\r\nHost: t:8080\r\n\r\n");
    assert_eq!(
        r.header("location"),
        Some("http://t:8080/elsewhere/moved/p")
    );

    let r = s.get("/to-host/x");
    assert_eq!(r.status, 302, "nginx and Caddy default to 302: {r:?}");
    assert_eq!(r.header("location"), Some("https://t/to-host/x"));
    // No usable Host: no Location can be made.
    let r = s.request(b"GET /to-host/x HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 400, "{r:?}");
}

#[test]
fn a_redirect_route_answers_the_same_over_http2() {
    let (_d, s) = answers_site("rr-redirect-h2");
    let (status, head, _) = curl_h2c(s.addr, "/old/a%20b.html?x=1", &[]);
    assert_eq!(status, 301, "{head}");
    assert_eq!(field(&head, "location"), Some("/new/a%20b?x=1"), "{head}");
    let (status, head, _) = curl_h2c(s.addr, "/moved/p", &[]);
    assert_eq!(status, 308, "{head}");
    let want = format!("http://{}/elsewhere/moved/p", s.addr);
    assert_eq!(field(&head, "location"), Some(want.as_str()), "{head}");
}

/// nginx `return 410 "text"`, Caddy `respond`: the body as written, with
/// its type; without a body, a status of 400 or more gets the server's
/// small error page (nginx `return 404;`).
#[test]
fn a_respond_route_sends_its_fixed_answer_on_http1_and_http2() {
    let (_d, s) = answers_site("rr-respond");
    let r = s.get("/gone");
    assert_eq!(r.status, 410, "{r:?}");
    assert_eq!(r.text(), "gone for good\n");
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    // HEAD: the same head, no body (RFC 9110 §9.3.2); pipelined, so a
    // body sent after it would spoil the GET's answer.
    let mut c = s.connect();
    let mut both = request("HEAD", "/gone", &[]);
    both.extend_from_slice(&get("/gone"));
    c.send(&both);
    let h = c.read_head();
    assert_eq!((h.status, h.content_length()), (410, Some(14)), "{h:?}");
    assert_eq!(c.read().text(), "gone for good\n");
    let r = s.get("/robots.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.text(), "User-agent: *\nDisallow: /\n");
    let r = s.get("/missing/x");
    assert_eq!(r.status, 404);
    assert!(r.text().contains("404 Not Found"), "{r:?}");
    // Other paths still reach the site's files.
    assert_eq!(s.get("/").text(), "home\n");

    let (status, head, body) = curl_h2c(s.addr, "/gone", &[]);
    assert_eq!(status, 410, "{head}");
    assert_eq!(body, b"gone for good\n");
    assert_eq!(field(&head, "content-length"), Some("14"), "{head}");
}

/// The WordPress case from nginx's documentation: `location ~*
/// \.(css|js|png|...)$ { expires max; }` before `location / { try_files
/// ... /index.php }`. A regex route is tried before prefix routes, so a
/// missing theme asset is the static handler's small 404 and PHP never
/// runs; every other path still reaches the front controller.
#[test]
fn an_extension_route_answers_a_missing_asset_without_asking_php() {
    require(PHP_CGI, "php-cgi");
    let dir = TempDir::new("rr-assets");
    dir.mkdir("www/wp-content/themes/t");
    dir.write("www/wp-content/themes/t/style.css", "body{}\n");
    let hits = dir.join("hits");
    dir.write(
        "www/index.php",
        format!(
            "<?php file_put_contents({:?}, $_SERVER['REQUEST_URI'] . \"\\n\", FILE_APPEND); \
             http_response_code(404); echo str_repeat('wordpress 404 page ', 2000);\n",
            hits.display().to_string()
        ),
    );
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"php\"\ncommand = [\"{PHP_CGI}\"]\nprocesses = 1\n\
             env = {{ PHP_FCGI_CHILDREN = \"0\", PHP_FCGI_MAX_REQUESTS = \"0\" }}\n\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/\"\nphp = {{ pool = \"php\" }}\n\n\
             [[site.route]]\nregex = '(?i)\\.(css|js|png|jpe?g|gif|svg|woff2?)$'\nstatic = {{}}\n"
        ),
    );
    let s = Server::with_config(&cfg);
    for path in [
        "/wp-content/themes/t/missing.css",
        "/x/LOGO.PNG",
        "/a.woff2",
    ] {
        let r = s.get(path);
        assert_eq!(r.status, 404, "{path}: {r:?}");
        assert!(
            r.body.len() < 300,
            "{path}: a small 404, not the app's page"
        );
    }
    let r = s.get("/wp-content/themes/t/style.css");
    assert_eq!((r.status, r.text().as_str()), (200, "body{}\n"));
    assert!(!hits.exists(), "PHP ran for an asset");
    // The front controller still takes the rest.
    let r = s.get("/2024/hello-world/");
    assert_eq!(r.status, 404);
    assert!(r.body.len() > 30_000, "{}", r.body.len());
    let ran = std::fs::read_to_string(&hits).expect("the front controller ran");
    assert_eq!(ran, "/2024/hello-world/\n");
}

/// nginx `client_max_body_size` in a `location`: a route's limit replaces
/// the server's, smaller or larger; 413 on HTTP/1 (announced or chunked)
/// and HTTP/2 as the server-wide limit does.
#[test]
fn a_routes_max_body_bytes_replaces_the_servers_on_http1_and_http2() {
    let dir = TempDir::new("rr-body");
    executable(
        &dir,
        "cgi-bin/echo.sh",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nexec wc -c\n",
    );
    dir.mkdir("www");
    let cfg = dir.config(
        "stoa.toml",
        "[limits]\nmax_body_bytes = 1000\n\n\
         [[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nprefix = \"/small/\"\ncgi = { script = \"cgi-bin/echo.sh\" }\n\
         max_body_bytes = 10\n\n\
         [[site.route]]\nprefix = \"/big/\"\ncgi = { script = \"cgi-bin/echo.sh\" }\n\
         max_body_bytes = \"10 KiB\"\n\n\
         [[site.route]]\nprefix = \"/plain/\"\ncgi = { script = \"cgi-bin/echo.sh\" }\n",
    );
    let s = Server::with_config(&cfg);
    let post = |path: &str, n: usize| {
        let mut req =
            format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {n}\r\n\r\n").into_bytes();
        req.extend(std::iter::repeat_n(b'x', n));
        s.request(&req)
    };
    assert_eq!(post("/small/", 10).text().trim(), "10");
    assert_eq!(post("/small/", 11).status, 413);
    assert_eq!(post("/big/", 5000).text().trim(), "5000");
    assert_eq!(post("/big/", 10241).status, 413);
    assert_eq!(post("/plain/", 1000).text().trim(), "1000");
    assert_eq!(post("/plain/", 1001).status, 413);
    // Chunked: the length is known only as it arrives.
    let r = s.request(
        b"POST /small/ HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
          8\r\nxxxxxxxx\r\n8\r\nxxxxxxxx\r\n0\r\n\r\n",
    );
    assert_eq!(r.status, 413, "{r:?}");
    let mut big =
        b"POST /big/ HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n".to_vec();
    big.extend([b'x'; 2000]);
    big.extend_from_slice(b"\r\n0\r\n\r\n");
    let r = s.request(&big);
    assert_eq!(
        (r.status, r.text().trim()),
        (200, "2000"),
        "over the server's limit, under the route's"
    );

    let body20 = "x".repeat(20);
    let (status, head, _) = curl_h2c(s.addr, "/small/", &["--data-binary", &body20]);
    assert_eq!(status, 413, "{head}");
    let body2000 = "x".repeat(2000);
    let (status, head, body) = curl_h2c(s.addr, "/big/", &["--data-binary", &body2000]);
    assert_eq!(
        (status, String::from_utf8_lossy(&body).trim()),
        (200, "2000"),
        "{head}"
    );
}

/// nginx `fastcgi_read_timeout` in one `location`: a route's `timeout`
/// replaces its pool's, so a slow report endpoint may take longer than
/// the rest of the application.
#[test]
fn a_routes_timeout_replaces_its_pools_response_timeout() {
    require(PHP_CGI, "php-cgi");
    let dir = TempDir::new("rr-timeout");
    dir.write("www/slow.php", "<?php sleep(2); echo \"late\\n\";\n");
    dir.write(
        "www/report/slow.php",
        "<?php sleep(2); echo \"report\\n\";\n",
    );
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"php\"\ncommand = [\"{PHP_CGI}\"]\nprocesses = 2\ntimeout = \"1s\"\n\
             env = {{ PHP_FCGI_CHILDREN = \"0\", PHP_FCGI_MAX_REQUESTS = \"0\" }}\n\n\
             [[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/\"\nphp = {{ pool = \"php\" }}\n\n\
             [[site.route]]\nprefix = \"/report/\"\nphp = {{ pool = \"php\" }}\ntimeout = \"10s\"\n"
        ),
    );
    let s = Server::with_config(&cfg);
    assert_eq!(s.get("/slow.php").status, 504);
    let r = s.get("/report/slow.php");
    assert_eq!((r.status, r.text().as_str()), (200, "report\n"), "{r:?}");
}

/// nginx `default_type`: the type of a file whose extension says none,
/// per site and per route (the route's replaces the site's).
#[test]
fn default_type_names_files_of_unknown_extension() {
    let dir = TempDir::new("rr-default-type");
    dir.write("www/README", "read me\n");
    dir.write("www/docs/CHANGES", "changes\n");
    dir.write("www/page.html", "<p>\n");
    let cfg = dir.config(
        "stoa.toml",
        "[[site]]\nroot = \"www\"\ndefault_type = \"text/plain; charset=utf-8\"\n\n\
         [[site.route]]\nprefix = \"/docs/\"\nstatic = {}\ndefault_type = \"text/markdown\"\n",
    );
    let s = Server::with_config(&cfg);
    let r = s.get("/README");
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    let r = s.get("/docs/CHANGES");
    assert_eq!(r.header("content-type"), Some("text/markdown"));
    let r = s.get("/page.html");
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
}

/// A route that can never be chosen is reported by `stoa check` as a
/// warning naming the routes that take its paths; the file is still
/// accepted (exit 0).
#[test]
fn check_warns_about_a_regex_route_that_earlier_routes_leave_nothing() {
    let d = TempDir::new("rr-check");
    d.mkdir("www");
    let cfg = d.config(
        "stoa.toml",
        "[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nsuffix = \".css\"\nstatic = {}\n\n\
         [[site.route]]\nregex = '\\.(png|jpg)$'\nstatic = {}\n\n\
         [[site.route]]\nregex = '^/img/.*\\.png$'\nrespond = { status = 404 }\n\n\
         [[site.route]]\nregex = '\\.(css|js)$'\nstatic = {}\n",
    );
    let o = Command::new(stoa_bin())
        .args(["check", cfg.to_str().expect("utf-8")])
        .output()
        .expect("run stoa check");
    let t = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("warning:")
            && t.contains("site[0].route[2]: never used")
            && t.contains("site[0].route[1]"),
        "{t}"
    );
    assert!(!t.contains("route[3]: never used"), "{t}");
}
