//! Server-side includes end to end (issue 13): the same directory of
//! `.shtml` pages served by Apache (Debian `apache2`, `mod_include`,
//! started here on a loopback port as a private instance) and by Stoa,
//! the bodies compared after the dates are normalized. The pages include
//! static files, a CGI script and a FastCGI application (one process on a
//! Unix socket that both servers use), nest, loop, fail, use every
//! directive, and put a directive across the boundary of Stoa's reads.
//! Then what only Stoa is asked: `exec` (CVE-2009-1195: off unless
//! configured), its time limit, Last-Modified and no ETag.
//!
//! Needs the Debian package apache2 (a missing one fails the test with a
//! message naming it); the FastCGI application is Stoa's own
//! `stoa-hello-fcgi`.

mod common;
mod fastcgi_support;

use common::*;
use fastcgi_support::{App, HELLO};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

const APACHE: &str = "/usr/sbin/apache2";

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

/// Apache on `port`, its own instance (config, pid file, logs, cgid
/// socket in `dir`), serving `dir/www` with mod_include on `.shtml`.
struct Apache {
    child: Child,
    addr: SocketAddr,
    log: std::path::PathBuf,
}

impl Apache {
    fn start(dir: &TempDir, fcgi_sock: &Path) -> Apache {
        require(APACHE, "apache2");
        let port = free_port();
        let d = dir.path().display();
        let conf = format!(
            "ServerRoot /usr/lib/apache2\n\
             ServerName localhost\n\
             Listen 127.0.0.1:{port}\n\
             PidFile {d}/apache2.pid\n\
             DefaultRuntimeDir {d}\n\
             ErrorLog {d}/apache2-error.log\n\
             LogLevel warn\n\
             User www-data\n\
             Group www-data\n\
             LoadModule mpm_event_module modules/mod_mpm_event.so\n\
             LoadModule authz_core_module modules/mod_authz_core.so\n\
             LoadModule mime_module modules/mod_mime.so\n\
             LoadModule dir_module modules/mod_dir.so\n\
             LoadModule alias_module modules/mod_alias.so\n\
             LoadModule cgid_module modules/mod_cgid.so\n\
             LoadModule include_module modules/mod_include.so\n\
             LoadModule proxy_module modules/mod_proxy.so\n\
             LoadModule proxy_fcgi_module modules/mod_proxy_fcgi.so\n\
             StartServers 1\n\
             TypesConfig /etc/mime.types\n\
             AddType text/html .shtml\n\
             AddOutputFilter INCLUDES .shtml\n\
             DocumentRoot {d}/www\n\
             <Directory {d}/www>\n\
             \x20   Options +IncludesNOEXEC\n\
             \x20   SSILegacyExprParser on\n\
             \x20   Require all granted\n\
             </Directory>\n\
             ScriptSock {d}/cgid.sock\n\
             ScriptAlias /cgi-bin/ {d}/www/cgi-bin/\n\
             ProxyPass /fcgi/ unix:{}|fcgi://localhost/\n",
            fcgi_sock.display()
        );
        let conf_path = dir.write("apache2.conf", conf);
        use std::os::unix::process::CommandExt;
        let child = Command::new(APACHE)
            .arg("-f")
            .arg(&conf_path)
            .arg("-DFOREGROUND")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("start {APACHE}: {e}"));
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let mut a = Apache {
            child,
            addr,
            log: dir.join("apache2-error.log"),
        };
        let until = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect(addr).is_err() {
            if let Ok(Some(st)) = a.child.try_wait() {
                panic!("apache2 exited at start ({st}): {}", a.errors());
            }
            assert!(Instant::now() < until, "apache2 did not listen on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        a
    }

    fn get(&self, path: &str) -> Response {
        Conn::connect(self.addr).request(&get(path))
    }

    fn errors(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Apache {
    fn drop(&mut self) {
        // SAFETY: the process group of the child we started and have not
        // reaped (its workers are in it).
        unsafe {
            libc::kill(-(self.child.id() as i32), libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// A fixed modification time, so that `flastmod` prints the same in both
/// servers without normalizing.
const MTIME: u64 = 1_700_000_000;

fn set_mtime(p: &Path) {
    let f = std::fs::File::options()
        .write(true)
        .open(p)
        .expect("open to set mtime");
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(MTIME))
        .expect("set mtime");
}

/// The pages both servers serve.
fn pages(dir: &TempDir) {
    use std::os::unix::fs::PermissionsExt;
    dir.write("www/static.html", "static part\n");
    dir.write("www/big.bin", vec![b'z'; 123_456]);
    dir.write(
        "www/cgi-bin/hello.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\ncgi says %s\\n' \"$QUERY_STRING\"\n",
    );
    std::fs::set_permissions(
        dir.join("www/cgi-bin/hello.cgi"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod the CGI script");
    dir.write(
        "www/inc/nested.shtml",
        "nested[<!--#include virtual=\"deeper.shtml\" -->] uri=<!--#echo var=\"DOCUMENT_URI\" -->\
         <!--#set var=\"fromchild\" value=\"yes, parent said $fromparent\" -->",
    );
    dir.write(
        "www/inc/deeper.shtml",
        "deeper <!--#include file=\"leaf.txt\" --> name=<!--#echo var=\"DOCUMENT_NAME\" -->",
    );
    dir.write("www/inc/leaf.txt", "leaf");
    // An included page gets its own query (Apache's t/modules/include.t:
    // virtual.shtml includes header.shtml?mod_include test, whose title
    // echoes QUERY_STRING; virtualq.shtml, PR 12655).
    dir.write(
        "www/inc/args.shtml",
        "args[<!--#echo var=\"QUERY_STRING\" -->|<!--#echo var=\"QUERY_STRING_UNESCAPED\" -->\
         |<!--#echo var=\"DOCUMENT_ARGS\" -->]",
    );
    dir.write(
        "www/inc/virtual.shtml",
        "<!--#include virtual=\"/inc/header.shtml?mod_include test\" -->\n\
         Hello World\n\
         <!--#include virtual=\"/inc/footer.shtml\" -->\n",
    );
    dir.write(
        "www/inc/header.shtml",
        "<title><!--#echo var=\"QUERY_STRING\" --></title>\n",
    );
    dir.write("www/inc/footer.shtml", "<h5>footer</h5>\n");
    dir.write(
        "www/inc/virtualq.shtml",
        "<!--#echo var=\"QUERY_STRING\" -->\n\
         <!--#include virtual=\"args.shtml?$QUERY_STRING\" -->\n\
         <!--#include virtual=\"leaf.txt\" -->\n\
         <!--#echo var=\"QUERY_STRING\" -->\n",
    );
    dir.write(
        "www/loop.shtml",
        "loop[<!--#include virtual=\"/loop.shtml\" -->]",
    );
    dir.write(
        "www/index.shtml",
        "<!--#config timefmt=\"%Y-%m-%d %H:%M:%S\" -->\
         A: <!--#include virtual=\"/static.html\" -->\n\
         B: <!--#include virtual=\"/cgi-bin/hello.cgi?x=1&y=%41\" -->\n\
         C: <!--#include virtual=\"/fcgi/x?big=48&seed=5\" -->\n\
         D: <!--#include file=\"static.html\" -->\n\
         E: <!--#set var=\"fromparent\" value=\"hi\" --><!--#include virtual=\"inc/nested.shtml\" --> child: <!--#echo var=\"fromchild\" -->\n\
         F: <!--#include virtual=\"/missing.html\" -->\n\
         G: <!--#include virtual=\"/loop.shtml\" -->\n\
         H: <!--#echo var=\"DOCUMENT_NAME\" --> <!--#echo var=\"DOCUMENT_URI\" --> \
         <!--#echo var=\"QUERY_STRING_UNESCAPED\" --> <!--#echo var=\"QUERY_STRING\" --> \
         <!--#echo var=\"nope\" --> <!--#echo var=\"REQUEST_METHOD\" --> <!--#echo var=\"SERVER_PROTOCOL\" -->\n\
         I: <!--#echo var=\"DATE_LOCAL\" --> | <!--#echo var=\"DATE_GMT\" --> | <!--#echo var=\"LAST_MODIFIED\" -->\n\
         J: <!--#fsize file=\"static.html\" --> <!--#config sizefmt=\"bytes\" --><!--#fsize virtual=\"/big.bin\" --> \
         <!--#config sizefmt=\"abbrev\" --><!--#fsize file=\"big.bin\" --> <!--#flastmod file=\"static.html\" --> \
         <!--#flastmod virtual=\"/static.html\" --> <!--#fsize file=\"nothere\" -->\n\
         K: <!--#set var=\"v\" value=\"one ${DOCUMENT_NAME}\" --><!--#echo var=\"v\" --> \
         <!--#echo encoding=\"url\" var=\"v\" --> <!--#set var=\"html\" value=\"<b>&amp;\" -->\
         <!--#echo encoding=\"none\" var=\"html\" --> <!--#echo var=\"html\" -->\n\
         L: <!--#if expr=\"$v = /one/\" -->if-yes<!--#elif expr=\"1\" -->elif<!--#else -->else<!--#endif --> \
         <!--#if expr=\"($v != x) && !($v < a) || $nope\" -->e2<!--#endif --> \
         <!--#if expr=\"${v} = 'one index.shtml'\" -->eq<!--#else -->ne<!--#endif --> \
         <!--#if expr=\"$v = /o(n)e/\" -->cap=<!--#echo var=\"1\" --><!--#endif --> \
         <!--#if expr=\"$nope\" -->no<!--#elif expr=\"$v = /zzz/\" -->no<!--#else -->else-taken<!--#endif -->\n\
         M: <!--#config errmsg=\"[oops]\" --><!--#bogus --> <!--#include virtual=\"/missing.html\" --> \
         <!--#echo --><!--#config errmsg=\"[an error occurred while processing this directive]\" -->\n\
         N: <!--#exec cmd=\"echo hi\" --> <!--#exec cgi=\"/cgi-bin/hello.cgi\" -->\n\
         O: <!--#include virtual=\"/static.html\" onerror=\"/static.html\" -->\n\
         P: <!--#include virtual=\"/inc/args.shtml?q=%3Cb%3E&r\" -->\n\
         end\n",
    );
    // A directive across Stoa's read boundary (16 KiB): text up to one
    // byte before it, then the directive.
    let mut long = vec![b'x'; 16 * 1024 - 10];
    long.extend_from_slice(b"<!--#echo var=\"DOCUMENT_NAME\" -->|");
    long.extend_from_slice(&vec![b'y'; 16 * 1024]);
    long.extend_from_slice(b"<!--#include virtual=\"/static.html\" -->done\n");
    dir.write("www/long.shtml", long);
    for f in [
        "www/static.html",
        "www/big.bin",
        "www/index.shtml",
        "www/long.shtml",
    ] {
        set_mtime(&dir.join(f));
    }
}

/// Dates as `config timefmt` above or the default format, replaced.
fn normalize(body: &[u8]) -> String {
    regex_lite_replace(&String::from_utf8_lossy(body))
}

/// Replaces `YYYY-MM-DD HH:MM:SS` by `DATE` (no regex crate in the tests:
/// a small scan).
fn regex_lite_replace(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let shape = b"dddd-dd-dd dd:dd:dd";
    while i < b.len() {
        let fits = b.len() - i >= shape.len()
            && shape.iter().zip(&b[i..]).all(|(&p, &c)| {
                if p == b'd' {
                    c.is_ascii_digit()
                } else {
                    p == c
                }
            });
        if fits {
            out.push_str("DATE");
            i += shape.len();
        } else {
            let ch = s[i..].chars().next().unwrap_or('\u{fffd}');
            out.push(ch);
            i += ch.len_utf8().max(1);
        }
    }
    out
}

/// The line of the page that includes itself, which differs on purpose:
/// Apache 2.4 recurses until `LimitInternalRecursion` (10 levels), Stoa
/// refuses the include of a page already being included at once. Each
/// is checked on its own.
fn loop_line(page: String) -> String {
    page.lines()
        .map(|l| if l.starts_with("G: ") { "G: (loop)" } else { l })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Both servers on the same directory: (dir, apache, stoa, app).
fn both(tag: &str) -> (TempDir, Apache, Server, App) {
    let dir = TempDir::new(tag);
    pages(&dir);
    let sock = dir.join("hello.sock");
    let app = App::spawn(&sock, HELLO, &["--mpx"]);
    // Apache's workers (www-data) connect to it too.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777))
            .expect("chmod the FastCGI socket");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod the test directory");
    }
    let apache = Apache::start(&dir, &sock);
    let d = dir.path().display();
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "\
             [[pool]]\nname = \"hello\"\naddress = [\"unix:{}\"]\n\n\
             [[site]]\nroot = \"{d}/www\"\n\n\
             [[site.route]]\nsuffix = \".shtml\"\nssi = {{}}\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"{d}/www/cgi-bin\" }}\n\n\
             [[site.route]]\nprefix = \"/fcgi/\"\nfastcgi = {{ pool = \"hello\" }}\n",
            sock.display()
        ),
    );
    let stoa = Server::with_config(&cfg);
    (dir, apache, stoa, app)
}

#[test]
fn issue_13_every_directive_prints_what_apache_mod_include_prints() {
    let (_dir, apache, stoa, _app) = both("ssi-apache");
    let a = apache.get("/index.shtml");
    assert!(
        a.text()
            .contains(&format!("G: {}[an error", "loop[".repeat(10))),
        "apache stops a self-include after 10 levels: {}",
        a.text()
    );
    for path in [
        "/index.shtml?a=b%20c&d",
        "/index.shtml",
        "/long.shtml",
        "/inc/nested.shtml",
        "/inc/virtual.shtml",
        "/inc/virtualq.shtml?foo=bar",
    ] {
        let a = apache.get(path);
        let s = stoa.get(path);
        assert_eq!(a.status, 200, "apache {path}: {}", apache.errors());
        assert_eq!(s.status, 200, "stoa {path}: {}", stoa.stderr());
        let (a_body, s_body) = (loop_line(normalize(&a.body)), loop_line(normalize(&s.body)));
        assert_eq!(
            s_body,
            a_body,
            "{path}: stoa (left) and apache (right) differ\napache log:\n{}\nstoa log:\n{}",
            apache.errors(),
            stoa.stderr()
        );
    }
    // The comparison means something: the page did include and evaluate.
    let s = stoa.get("/index.shtml?a=b%20c&d");
    let text = normalize(&s.body);
    for want in [
        "A: static part\n",
        "B: cgi says x=1&y=%41\n",
        "D: static part\n",
        "E: nested[deeper leaf name=index.shtml] uri=/index.shtml child: yes, parent said hi\n",
        "F: [an error occurred while processing this directive]\n",
        "G: loop[[an error occurred while processing this directive]]\n",
        "I: DATE | DATE | DATE\n",
        // apr_strfsize pads to four columns.
        "J:  12  123,456 121K",
        "L: if-yes e2 eq cap=n else-taken\n",
        "M: [oops] [oops] [oops]\n",
        "P: args[q=%3Cb%3E&amp;r|q=\\&lt;b\\&gt;\\&amp;r|a=b%20c&amp;d]\n",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let fcgi = pattern(48, 5);
    assert!(contains(&s.body, &fcgi), "the FastCGI output is included");
    // Apache's own include.t: virtual.shtml and virtualq.shtml (PR 12655).
    let v = stoa.get("/inc/virtual.shtml").text();
    assert!(v.contains("<title>mod_include test</title>"), "{v}");
    assert!(v.contains("Hello World") && v.contains("footer"), "{v}");
    let q = stoa.get("/inc/virtualq.shtml?foo=bar").text();
    assert!(
        q.starts_with("foo=bar\nargs[foo=bar|foo=bar|foo=bar]\nleaf\nfoo=bar"),
        "{q}"
    );
}

/// An included page's `QUERY_STRING` and `QUERY_STRING_UNESCAPED` are
/// those of its own request (Apache's include.t, virtual.shtml), in
/// `echo`, `printenv` and an `exec cmd`'s environment; a page included
/// without a query, and the including page after the include, see the
/// including page's. (Apache leaves the last nested query in the table
/// it shares with the including page; its documentation speaks of the
/// "active SSI document", which is what is done here.)
#[test]
fn an_included_page_sees_its_own_query_string_and_the_including_page_keeps_its_own() {
    let dir = TempDir::new("ssi-query");
    dir.write(
        "www/outer.shtml",
        "1:<!--#include virtual=\"/inner.shtml?x=%41%20b&y\" -->\n\
         2:<!--#include virtual=\"/inner.shtml\" -->\n\
         3:<!--#echo var=\"QUERY_STRING\" -->|<!--#echo var=\"QUERY_STRING_UNESCAPED\" -->\n",
    );
    dir.write(
        "www/inner.shtml",
        "<!--#echo var=\"QUERY_STRING\" -->|<!--#echo var=\"QUERY_STRING_UNESCAPED\" -->\
         |<!--#echo var=\"DOCUMENT_ARGS\" -->|<!--#exec cmd=\"printf %s \\\"$QUERY_STRING\\\"\" -->",
    );
    dir.write(
        "www/env.shtml",
        "<!--#include virtual=\"/printenv.shtml?p=1\" -->",
    );
    dir.write("www/printenv.shtml", "<!--#printenv -->");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"{}/www\"\n\n[[site.route]]\nsuffix = \".shtml\"\nssi = {{ exec = true }}\n",
            dir.path().display()
        ),
    );
    let stoa = Server::with_config(&cfg);
    let r = stoa.get("/outer.shtml?o=%3C1%3E");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        "1:x=%41%20b&amp;y|x=A b\\&amp;y|o=%3C1%3E|x=%41%20b&y\n\
         2:o=%3C1%3E|o=\\&lt;1\\&gt;|o=%3C1%3E|o=%3C1%3E\n\
         3:o=%3C1%3E|o=\\&lt;1\\&gt;\n"
    );
    let env = stoa.get("/env.shtml?o=2").text();
    assert!(env.contains("QUERY_STRING=p=1\n"), "{env}");
    assert!(env.contains("QUERY_STRING_UNESCAPED=p=1\n"), "{env}");
    assert!(env.contains("DOCUMENT_ARGS=o=2\n"), "{env}");
    assert!(!env.contains("QUERY_STRING=o=2"), "{env}");
}

#[test]
fn issue_13_exec_is_refused_unless_configured_cve_2009_1195() {
    let dir = TempDir::new("ssi-noexec");
    dir.write(
        "www/x.shtml",
        "a<!--#exec cmd=\"touch pwned\" -->b<!--#exec cgi=\"/x.shtml\" -->c",
    );
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"{}/www\"\n\n[[site.route]]\nsuffix = \".shtml\"\nssi = {{}}\n",
            dir.path().display()
        ),
    );
    let stoa = Server::with_config(&cfg);
    let r = stoa.get("/x.shtml");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        "a[an error occurred while processing this directive]b\
         [an error occurred while processing this directive]c"
    );
    assert!(!dir.join("www/pwned").exists(), "exec ran a command");
}

#[test]
fn issue_13_exec_runs_commands_and_cgi_when_configured_and_a_slow_command_is_cut_off() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("ssi-exec");
    dir.write(
        "www/x.shtml",
        "[<!--#exec cmd=\"echo $DOCUMENT_NAME; pwd\" -->]\
         [<!--#exec cgi=\"/cgi-bin/hello.cgi?q=1\" -->]\
         [<!--#exec cmd=\"sleep 20\" -->]after\n",
    );
    dir.write(
        "www/cgi-bin/hello.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\ncgi %s' \"$QUERY_STRING\"\n",
    );
    std::fs::set_permissions(
        dir.join("www/cgi-bin/hello.cgi"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    let d = dir.path().display();
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"{d}/www\"\n\n\
             [[site.route]]\nsuffix = \".shtml\"\nssi = {{ exec = true, exec_timeout = \"1s\" }}\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"{d}/www/cgi-bin\" }}\n"
        ),
    );
    let stoa = Server::with_config(&cfg);
    let t = Instant::now();
    let r = stoa.get("/x.shtml");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        format!(
            "[x.shtml\n{d}/www\n][cgi q=1]\
             [[an error occurred while processing this directive]]after\n"
        )
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    // The worker goes on.
    assert_eq!(stoa.get("/x.shtml").status, 200);
}

#[test]
fn issue_13_pages_carry_no_etag_and_last_modified_only_when_configured() {
    let dir = TempDir::new("ssi-headers");
    dir.write("www/a.shtml", "x");
    dir.write("www/b.shtm", "y");
    set_mtime(&dir.join("www/a.shtml"));
    set_mtime(&dir.join("www/b.shtm"));
    let d = dir.path().display();
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"{d}/www\"\n\n\
             [[site.route]]\nsuffix = \".shtm\"\nssi = {{ last_modified = true }}\n\n\
             [[site.route]]\nsuffix = \".shtml\"\nssi = {{}}\n"
        ),
    );
    let stoa = Server::with_config(&cfg);
    let a = stoa.get("/a.shtml");
    assert_eq!(a.status, 200);
    assert_eq!(a.header("etag"), None);
    assert_eq!(a.header("last-modified"), None);
    assert_eq!(a.header("content-type"), Some("text/html"));
    let b = stoa.get("/b.shtm");
    assert_eq!(b.header("etag"), None);
    assert_eq!(
        b.header("last-modified"),
        Some("Tue, 14 Nov 2023 22:13:20 GMT")
    );
    // Missing pages and paths out of the root are refused as such.
    assert_eq!(stoa.get("/nothere.shtml").status, 404);
    assert_eq!(stoa.get("/../etc/x.shtml").status, 400);
}

#[test]
fn issue_13_output_starts_before_a_slow_include_ends() {
    let dir = TempDir::new("ssi-stream");
    dir.write(
        "www/s.shtml",
        "first<!--#include virtual=\"/fcgi/x?sleep=1500&big=3\" -->last",
    );
    let sock = dir.join("hello.sock");
    let _app = App::spawn(&sock, HELLO, &["--mpx"]);
    let d = dir.path().display();
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[pool]]\nname = \"hello\"\naddress = [\"unix:{}\"]\n\n\
             [[site]]\nroot = \"{d}/www\"\n\n\
             [[site.route]]\nsuffix = \".shtml\"\nssi = {{}}\n\n\
             [[site.route]]\nprefix = \"/fcgi/\"\nfastcgi = {{ pool = \"hello\" }}\n",
            sock.display()
        ),
    );
    let stoa = Server::with_config(&cfg);
    let mut c = Conn::connect(stoa.addr);
    c.send(&get("/s.shtml"));
    let t = Instant::now();
    let first = c.read_raw(1).expect("the first byte");
    assert_eq!(first, b"H");
    assert!(
        t.elapsed() < Duration::from_millis(1200),
        "the head waited for the include: {:?}",
        t.elapsed()
    );
    let mut got = Vec::new();
    while !contains(&got, b"first") {
        got.extend(c.read_raw(1).expect("more"));
        assert!(
            t.elapsed() < Duration::from_millis(1200),
            "the text before the include waited for it"
        );
    }
}

#[test]
fn issue_13_a_directive_split_at_every_byte_across_reads_prints_the_same() {
    // Stoa reads pages larger than its template cache takes (256 KiB)
    // 16 KiB at a time: pad each page past that so that a read boundary
    // falls at every byte of the directive, and one past it.
    const READ: usize = 16 * 1024;
    const PAD: usize = 17 * READ;
    let directive = b"<!--#echo var=\"DOCUMENT_NAME\" encoding=\"none\" -->";
    let dir = TempDir::new("ssi-split");
    for k in 0..=directive.len() {
        let mut page = vec![b'.'; PAD - k];
        page.extend_from_slice(directive);
        page.extend_from_slice(b"|end");
        dir.write(&format!("www/p{k}.shtml"), page);
    }
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"{}/www\"\n\n[[site.route]]\nsuffix = \".shtml\"\nssi = {{}}\n",
            dir.path().display()
        ),
    );
    let stoa = Server::with_config(&cfg);
    for k in 0..=directive.len() {
        let r = stoa.get(&format!("/p{k}.shtml"));
        assert_eq!(r.status, 200);
        let want = format!("{}p{k}.shtml|end", ".".repeat(PAD - k));
        assert!(r.text() == want, "split {k} bytes into the directive");
    }
}

#[test]
fn issue_13_printenv_lists_the_include_and_cgi_variables() {
    let dir = TempDir::new("ssi-printenv");
    dir.write(
        "www/e.shtml",
        "<!--#set var=\"mine\" value=\"a<b\" --><!--#printenv -->",
    );
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"{}/www\"\n\n[[site.route]]\nsuffix = \".shtml\"\nssi = {{}}\n",
            dir.path().display()
        ),
    );
    let stoa = Server::with_config(&cfg);
    let text = stoa.get("/e.shtml?x=%41").text();
    for line in [
        "DOCUMENT_URI=/e.shtml\n",
        "DOCUMENT_NAME=e.shtml\n",
        "QUERY_STRING=x=%41\n",
        "QUERY_STRING_UNESCAPED=x=A\n",
        "REQUEST_METHOD=GET\n",
        "mine=a&lt;b\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

/// Parsed pages are cached per worker and revalidated like static files:
/// a page rewritten in place (same size, same inode) is parsed again once
/// its mtime changed and `[cache] revalidate` has passed; nested pages
/// share the cache.
#[test]
fn issue_13_the_template_cache_sees_a_changed_page() {
    let dir = TempDir::new("ssi-cache");
    dir.write("www/a.shtml", "A1<!--#include virtual=\"b.shtml\" -->");
    dir.write("www/b.shtml", "B1<!--#echo var=\"DOCUMENT_NAME\" -->");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[cache]\nrevalidate = \"0s\"\n\n[[site]]\nroot = \"{}/www\"\n\n\
             [[site.route]]\nsuffix = \".shtml\"\nssi = {{}}\n",
            dir.path().display()
        ),
    );
    let stoa = Server::with_config(&cfg);
    assert_eq!(stoa.get("/a.shtml").text(), "A1B1a.shtml");
    assert_eq!(stoa.get("/a.shtml").text(), "A1B1a.shtml");
    // Same size, new mtime.
    std::thread::sleep(Duration::from_millis(20));
    dir.write("www/b.shtml", "B2<!--#echo var=\"DOCUMENT_NAME\" -->");
    assert_eq!(stoa.get("/a.shtml").text(), "A1B2a.shtml");
    // Replaced (a new inode) by a rename.
    dir.write("www/a.new", "A3<!--#include virtual=\"b.shtml\" -->");
    std::fs::rename(dir.join("www/a.new"), dir.join("www/a.shtml")).unwrap();
    assert_eq!(stoa.get("/a.shtml").text(), "A3B2a.shtml");
    // Gone: 404, not the cached page.
    std::fs::remove_file(dir.join("www/a.shtml")).unwrap();
    assert_eq!(stoa.get("/a.shtml").status, 404);
}

#[test]
fn issue_13_an_include_takes_the_routing_decision_a_request_takes_cached_or_not() {
    // The include of a static file is answered from the file cache once
    // the file is in it (revalidate 60 s: the second page below is served
    // without a stat); that shortcut must not reach past what routing
    // decides for a request: dotfiles and deny routes stay 403, a rewrite
    // is followed, a CGI route runs its script (never its source), a
    // directory gets its index.
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("ssi-route");
    dir.write(
        "www/page.shtml",
        "<!--#config errmsg=\"[E]\" -->\
         1:<!--#include virtual=\"/part.txt\" -->\n\
         2:<!--#include virtual=\"part.txt\" -->\n\
         3:<!--#include virtual=\"/.hidden.txt\" -->\n\
         4:<!--#include virtual=\"/private/x.txt\" -->\n\
         5:<!--#include virtual=\"/old.txt\" -->\n\
         6:<!--#include virtual=\"/cgi-bin/hi.cgi\" -->\n\
         7:<!--#include virtual=\"/dir/\" -->\n",
    );
    dir.write("www/part.txt", "P");
    dir.write("www/new.txt", "N");
    dir.write("www/.hidden.txt", "hidden");
    dir.write("www/private/x.txt", "private");
    dir.write("www/dir/index.html", "I");
    dir.write(
        "www/cgi-bin/hi.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nC'\n",
    );
    std::fs::set_permissions(
        dir.join("www/cgi-bin/hi.cgi"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod the CGI script");
    let www = dir.join("www");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[cache]\nrevalidate = \"60s\"\n\n[[site]]\nroot = \"{w}\"\n\n\
             [[site.rewrite]]\nfrom = \"^/old\\\\.txt$\"\nto = \"/new.txt\"\n\n\
             [[site.route]]\nsuffix = \".shtml\"\nssi = {{}}\n\n\
             [[site.route]]\nprefix = \"/private/\"\ndeny = true\n\n\
             [[site.route]]\nprefix = \"/cgi-bin/\"\ncgi = {{ dir = \"{w}/cgi-bin\" }}\n",
            w = www.display()
        ),
    );
    let stoa = Server::with_config(&cfg);
    let want = "1:P\n2:P\n3:[E]\n4:[E]\n5:N\n6:C\n7:I\n";
    // The first page fills the cache; the second is served from it.
    for round in 0..3 {
        let r = stoa.get("/page.shtml");
        assert_eq!(r.status, 200, "round {round}");
        assert_eq!(r.text(), want, "round {round}");
    }
    // The same files asked for directly: the same decisions.
    assert_eq!(stoa.get("/.hidden.txt").status, 403);
    assert_eq!(stoa.get("/private/x.txt").status, 403);
    assert_eq!(stoa.get("/cgi-bin/hi.cgi").text(), "C");
}
