//! `error_pages` and `intercept_errors` end to end, as nginx's
//! `error_page 404 /404.html` and `fastcgi_intercept_errors on` behave:
//! an error Stoa answers itself (a missing file, `try_files` falling
//! through to `=404`, a refused method, a dead pool) is answered with the
//! page's body and its own status, over HTTP/1.1 and HTTP/2; an
//! application's error only with `intercept_errors`, its connection then
//! drained and reused; the page may be an SSI page; a failing page gives
//! the built-in one; a full URL redirects.
//!
//! Needs curl (Debian package curl, built with nghttp2).

mod common;

use common::*;
use std::net::SocketAddr;
use std::process::Command;

const HELLO_FCGI: &str = env!("CARGO_BIN_EXE_stoa-hello-fcgi");

/// `curl --http2-prior-knowledge -i`: (status, head, body).
fn curl_h2c(addr: SocketAddr, path: &str, extra: &[&str]) -> (u16, String, Vec<u8>) {
    require("curl", "curl");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--http2-prior-knowledge", "-D-"])
        .args(extra)
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("run curl");
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = out.stdout;
    let end = find(&s, b"\r\n\r\n").expect("a head");
    let head = String::from_utf8_lossy(&s[..end]).to_ascii_lowercase();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(0);
    (status, head, s[end + 4..].to_vec())
}

const PAGE_404: &str = "<h1>custom not found</h1>\n";
const PAGE_5XX: &str = "<h1>custom trouble</h1>\n";
const PAGE_403: &str = "<h1>custom forbidden</h1>\n";

/// A site with error pages: a static 404 page, a 5xx page run by SSI, a
/// FastCGI application with and without `intercept_errors`, a dead pool,
/// `try_files` ending in `=404`, a route whose page is missing and one
/// whose page is a full URL.
fn site(tag: &str) -> (TempDir, Server) {
    let dir = TempDir::new(tag);
    dir.write("www/index.html", "home\n");
    dir.write("www/errors/404.html", PAGE_404);
    dir.write("www/errors/403.html", PAGE_403);
    dir.write("www/.git/config", "secret\n");
    dir.write("www/private/x.txt", "private\n");
    dir.write(
        "www/errors/50x.shtml",
        "<h1>custom trouble</h1>\n<!--#if expr=\"1\" -->ssi ran: <!--#echo var=\"DOCUMENT_NAME\" -->\n<!--#endif -->",
    );
    dir.write("www/spa/real.txt", "real\n");
    dir.write("www/kept/x.txt", "x\n");
    dir.write("www/errors/4xx.txt", "client trouble\n");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"app\"\ncommand = [\"{HELLO_FCGI}\"]\nprocesses = 1\n\n\
             [[pool]]\nname = \"dead\"\naddress = [\"127.0.0.1:1\"]\n\n\
             [[site]]\nroot = \"www\"\n\
             error_pages = {{ \"404\" = \"/errors/404.html\", \"403\" = \"/errors/403.html\", \
             \"5xx\" = \"/errors/50x.shtml\" }}\n\n\
             [[site.route]]\nprefix = \"/private/\"\ndeny = true\n\n\
             [[site.route]]\nsuffix = \".shtml\"\nssi = {{}}\n\n\
             [[site.route]]\nprefix = \"/app/\"\nfastcgi = {{ pool = \"app\" }}\nintercept_errors = true\n\n\
             [[site.route]]\nprefix = \"/raw/\"\nfastcgi = {{ pool = \"app\" }}\n\n\
             [[site.route]]\nprefix = \"/dead/\"\nfastcgi = {{ pool = \"dead\" }}\n\n\
             [[site.route]]\nprefix = \"/spa/\"\nstatic = {{}}\ntry_files = [\"$uri\", \"=404\"]\n\n\
             [[site.route]]\nprefix = \"/broken/\"\nstatic = {{}}\n\
             error_pages = {{ \"404\" = \"/errors/nothere.html\" }}\n\n\
             [[site.route]]\nprefix = \"/moved/\"\nstatic = {{}}\n\
             error_pages = {{ \"4xx\" = \"https://example.com/gone\" }}\n\n\
             [[site.route]]\nprefix = \"/kept/\"\nstatic = {{}}\n\
             error_pages = {{ \"4xx\" = \"/errors/4xx.txt\" }}\n"
        ),
    );
    let server = Server::with_config(&cfg);
    (dir, server)
}

/// nginx `error_page 404 /404.html`: the page's body, the original
/// status, the page's Content-Type; HEAD gets the head alone.
#[test]
fn a_missing_file_gets_the_custom_404_page_with_status_404_over_h1_and_h2() {
    let (_dir, server) = site("errpages-404");
    let r = server.get("/nothere.html");
    assert_eq!(r.status, 404);
    assert_eq!(r.text(), PAGE_404);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.content_length(), Some(PAGE_404.len() as u64));
    let (status, _, body) = curl_h2c(server.addr, "/nothere.html", &[]);
    assert_eq!((status, body.as_slice()), (404, PAGE_404.as_bytes()));
    // HEAD: the same head, no body; the connection goes on after it.
    let mut c = server.connect();
    c.send(&request("HEAD", "/nothere.html", &[]));
    let head = c.read_head();
    assert_eq!(head.status, 404);
    assert_eq!(head.content_length(), Some(PAGE_404.len() as u64));
    assert_eq!(c.request(&get("/nothere.html")).status, 404);
    assert_eq!(c.request(&get("/index.html")).text(), "home\n");
}

/// Paths Stoa refuses (a dotfile, a `deny` route) get the 403 page, with
/// 403.
#[test]
fn refused_paths_get_the_403_page_with_status_403() {
    let (_dir, server) = site("errpages-403");
    for path in ["/.git/config", "/private/x.txt"] {
        let r = server.get(path);
        assert_eq!((r.status, r.text().as_str()), (403, PAGE_403), "{path}");
    }
}

/// An application's local redirect (RFC 3875 §6.2.2) to a missing file
/// is routed again; the 404 it meets gets the page like any other.
#[test]
fn a_local_redirect_to_a_missing_file_gets_the_404_page() {
    let (_dir, server) = site("errpages-redirect");
    let r = server.get("/raw/x?location=/index.html");
    assert_eq!((r.status, r.text().as_str()), (200, "home\n"));
    let r = server.get("/raw/x?location=/gone.html");
    assert_eq!((r.status, r.text().as_str()), (404, PAGE_404));
    let (status, _, body) = curl_h2c(server.addr, "/raw/x?location=/gone.html", &[]);
    assert_eq!((status, body.as_slice()), (404, PAGE_404.as_bytes()));
}

/// `try_files = ["$uri", "=404"]` falling through is a real 404 with the
/// custom page (not a soft 404 with status 200).
#[test]
fn try_files_falling_through_to_404_gives_the_real_status_and_the_custom_page() {
    let (_dir, server) = site("errpages-tryfiles");
    assert_eq!(server.get("/spa/real.txt").text(), "real\n");
    let r = server.get("/spa/unknown/route");
    assert_eq!(r.status, 404);
    assert_eq!(r.text(), PAGE_404);
}

/// An error with no page (the site has pages for 404 and 5xx) is the
/// built-in answer, untouched; where a page is given (the `4xx` class),
/// the fields its status needs stay with it: `Allow` with a 405 (RFC
/// 9110 §15.5.6), and the page's own Content-Type.
#[test]
fn an_error_without_a_page_is_built_in_and_a_page_keeps_the_fields_its_status_needs() {
    let (_dir, server) = site("errpages-405");
    let r = server.request(&request("DELETE", "/index.html", &[]));
    assert_eq!(r.status, 405);
    assert!(r.header("allow").is_some(), "{r:?}");
    assert!(r.text().contains("405 Method Not Allowed"), "{}", r.text());
    let k = server.request(&request("DELETE", "/kept/x.txt", &[]));
    assert_eq!(k.status, 405);
    assert_eq!(k.header("allow"), r.header("allow"));
    assert_eq!(k.text(), "client trouble\n");
    assert_eq!(k.header("content-type"), Some("text/plain; charset=utf-8"));
}

/// A dead pool's 502 gets the 5xx page, itself an SSI page run by a
/// subrequest, with the status kept.
#[test]
fn a_dead_pool_gets_the_5xx_page_run_by_ssi_with_status_502() {
    let (_dir, server) = site("errpages-dead");
    let r = server.get("/dead/x");
    assert_eq!(r.status, 502);
    assert_eq!(
        r.text(),
        format!("{PAGE_5XX}ssi ran: 50x.shtml\n"),
        "{}",
        server.stderr()
    );
    let (status, _, body) = curl_h2c(server.addr, "/dead/x", &[]);
    assert_eq!(status, 502);
    assert_eq!(body, format!("{PAGE_5XX}ssi ran: 50x.shtml\n").as_bytes());
}

/// nginx `fastcgi_intercept_errors on`: the application's 500 (and a
/// 404 with a large body) is replaced by the page, status kept; the
/// application's connection is drained and kept (the next answer comes
/// on the same one). Without it, the application's own error passes.
#[test]
fn intercept_errors_replaces_an_applications_errors_and_reuses_its_connection() {
    let (_dir, server) = site("errpages-intercept");
    let first = server.get("/app/x");
    assert_eq!(first.status, 200);
    assert!(first.text().contains("conns=1\n"), "{}", first.text());
    let r = server.get("/app/x?status=500");
    assert_eq!(r.status, 500);
    assert_eq!(r.text(), format!("{PAGE_5XX}ssi ran: 50x.shtml\n"));
    assert_eq!(
        r.header("x-pid"),
        None,
        "the application's fields went with it"
    );
    let big = server.get("/app/x?status=404&big=300000");
    assert_eq!(big.status, 404);
    assert_eq!(big.text(), PAGE_404);
    let (status, _, body) = curl_h2c(server.addr, "/app/x?status=500", &[]);
    assert_eq!(
        (status, body.as_slice()),
        (500, format!("{PAGE_5XX}ssi ran: 50x.shtml\n").as_bytes())
    );
    let after = server.get("/app/x");
    assert_eq!(after.status, 200);
    assert!(
        after.text().contains("conns=1\n"),
        "the application's connection was not kept: {}",
        after.text()
    );
    // A caught body too long to be worth reading (past 1 MiB) is
    // abandoned: the page comes at once all the same, and the
    // application answers the next request.
    let huge = server.get("/app/x?status=500&big=20000000");
    assert_eq!(huge.status, 500);
    assert_eq!(huge.text(), format!("{PAGE_5XX}ssi ran: 50x.shtml\n"));
    assert_eq!(server.get("/app/x").status, 200);
    // Not intercepted: the application's own answer.
    let raw = server.get("/raw/x?status=500");
    assert_eq!(raw.status, 500);
    assert!(raw.text().contains("query=status=500"), "{}", raw.text());
    assert!(raw.header("x-pid").is_some());
}

/// An error page that fails (missing here) gives the built-in page for
/// the original status, logged; the page's own 404 is not replaced in
/// turn (no loop). A full URL is a 302 to it, as nginx does.
#[test]
fn a_failing_page_falls_back_to_the_built_in_one_and_a_url_redirects() {
    let (_dir, server) = site("errpages-fallback");
    let r = server.get("/broken/x");
    assert_eq!(r.status, 404);
    assert!(r.text().contains("404 Not Found"), "{}", r.text());
    assert!(
        server.wait_stderr(
            0,
            "error page /errors/nothere.html for 404",
            std::time::Duration::from_secs(5)
        ),
        "{}",
        server.stderr()
    );
    let m = server.get("/moved/x");
    assert_eq!(m.status, 302);
    assert_eq!(m.header("location"), Some("https://example.com/gone"));
}
