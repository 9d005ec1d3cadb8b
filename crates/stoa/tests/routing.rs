//! Routing: which handler a request reaches, and the invariant that a file
//! a script route would run is never served as its source, whatever the
//! route order, spelling of the path or index setting. PHP runs through
//! php-cgi as a FastCGI pool Stoa spawns; CGI scripts are shell scripts.
//!
//! Needs the Debian package php-cgi (installed by test.sh).

mod common;
use common::*;

const PHP_SECRET: &str = "SECRET-SOURCE-MARKER";

/// A PHP page whose source holds a marker that running it never prints.
fn php_page(tag: &str) -> String {
    format!(
        "<?php /* {PHP_SECRET} */ echo \"RAN {tag} SN=\", $_SERVER['SCRIPT_NAME'], \
         \" PI=\", $_SERVER['PATH_INFO'] ?? '', \" QS=\", $_SERVER['QUERY_STRING'], \
         \" RU=\", $_SERVER['REQUEST_URI'], \" H=\", $_SERVER['HTTPS'] ?? '', \"\\n\";\n"
    )
}

fn php_pool() -> String {
    require(PHP_CGI, "php-cgi");
    format!(
        "[[pool]]\nname = \"php\"\ncommand = [\"{PHP_CGI}\"]\nprocesses = 1\n\
         env = {{ PHP_FCGI_CHILDREN = \"0\", PHP_FCGI_MAX_REQUESTS = \"0\" }}\n\n"
    )
}

fn config(dir: &TempDir, site: &str) -> std::path::PathBuf {
    dir.config("stoa.toml", &format!("{}{site}", php_pool()))
}

fn body_of(server: &Server, path: &str) -> (u16, String) {
    let r = server.get(path);
    (r.status, r.text())
}

/// A site laid out to tempt every mistake: a static prefix over PHP files,
/// `index.php` as the index, upper-case and trailing-dot spellings.
fn tempting_site(tag: &str) -> (TempDir, Server) {
    let dir = TempDir::new(tag);
    dir.mkdir("www/app");
    dir.write("www/index.php", php_page("index"));
    dir.write("www/app/doku.php", php_page("doku"));
    dir.write("www/app/UP.PHP", php_page("up"));
    dir.write("www/app/style.css", "body{}");
    let cfg = config(
        &dir,
        "[[site]]\nroot = \"www\"\nindex = [\"index.php\", \"index.html\"]\n\n\
         [[site.route]]\nprefix = \"/app/\"\nstatic = {}\n\n\
         [[site.route]]\nsuffix = \".php\"\n\
         fastcgi = { pool = \"php\", split_path = \".php\", params = { HTTPS = \"on\" } }\n",
    );
    let server = Server::with_config(&cfg);
    (dir, server)
}

/// No route order, spelling or index setting serves a script's source
/// (issue 9; the class of bug behind nginx/Apache PHP source disclosures).
#[test]
fn no_route_order_spelling_or_index_setting_serves_a_php_file_as_source() {
    let (_dir, server) = tempting_site("route-spellings");
    let cases = [
        "/",
        "/index.php",
        "/app/doku.php",
        "/app/doku.php/",
        "/app/doku.php/some/page",
        "/app/doku%2ephp",
        "/app//doku.php",
        "/app/./doku.php",
        "/app/x/../doku.php",
        "/app/doku.php.",
        "/app/doku.php%20",
        "/app/doku.php%00.txt",
        "/app/doku.php%0a.txt",
        "/app/UP.PHP",
        "/app/up.php",
        "/app/Doku.Php",
        "/APP/doku.php",
        "/app/doku.php?x=1",
        "/app/doku.php::$DATA",
        "/app/",
    ];
    for path in cases {
        let (status, body) = body_of(&server, path);
        assert!(
            !body.contains(PHP_SECRET) && !body.contains("<?php"),
            "{path}: source served ({status}): {body}"
        );
    }
    // The ones that name a script run it.
    for (path, tag) in [
        ("/", "index"),
        ("/index.php", "index"),
        ("/app/doku.php", "doku"),
        ("/app/doku.php/some/page", "doku"),
    ] {
        let (status, body) = body_of(&server, path);
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body.starts_with(&format!("RAN {tag}")), "{path}: {body}");
    }
    // A static file under the static prefix is still served.
    let (status, body) = body_of(&server, "/app/style.css");
    assert_eq!((status, body.as_str()), (200, "body{}"));
}

/// `split_path` gives SCRIPT_NAME and PATH_INFO as nginx's
/// `fastcgi_split_path_info ^(.+?\.php)(/.*)$` does (RFC 3875 §4.1.5,
/// §4.1.13), and route `params` reach the application.
#[test]
fn split_path_gives_the_script_its_name_and_the_rest_as_path_info() {
    let (_dir, server) = tempting_site("route-split");
    let (status, body) = body_of(&server, "/app/doku.php/wiki/start?do=edit");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("SN=/app/doku.php PI=/wiki/start QS=do=edit"),
        "{body}"
    );
    assert!(
        body.contains("H=on"),
        "params = {{ HTTPS = \"on\" }}: {body}"
    );
    // The index ran as an internal redirect: REQUEST_URI is what the
    // client asked for.
    let (_, body) = body_of(&server, "/?a=b");
    assert!(body.contains("SN=/index.php PI= QS=a=b RU=/?a=b"), "{body}");
}

/// CVE-2019-11043: a newline in the path must never reach the PATH_INFO
/// split (it made php-fpm's env buffer underflow behind nginx's regex).
#[test]
fn a_newline_in_the_path_never_reaches_split_path_cve_2019_11043() {
    let (_dir, server) = tempting_site("route-cve");
    for path in [
        "/app/doku.php/x%0Ay",
        "/app/doku.php%0A/x",
        "/index.php/%0a",
    ] {
        let (status, body) = body_of(&server, path);
        assert_eq!(status, 400, "{path}: {body}");
    }
}

/// The PHP preset (Caddy's `php_fastcgi`): scripts run with PATH_INFO,
/// other files are static, a directory runs its index.php, anything else
/// runs the front controller with the client's REQUEST_URI; `.php` files
/// are never served as files.
#[test]
fn the_php_preset_runs_scripts_serves_files_and_falls_back_to_the_front_controller() {
    let dir = TempDir::new("route-php");
    dir.mkdir("www/sub");
    dir.mkdir("www/plain");
    dir.write("www/index.php", php_page("front"));
    dir.write("www/sub/index.php", php_page("subindex"));
    dir.write("www/sub/page.php", php_page("page"));
    dir.write("www/plain/index.html", "plain index\n");
    dir.write("www/logo.txt", "a logo\n");
    let cfg = config(
        &dir,
        "[[site]]\nroot = \"www\"\n\n[[site.route]]\nprefix = \"/\"\nphp = { pool = \"php\" }\n",
    );
    let server = Server::with_config(&cfg);
    let expect = [
        ("/sub/page.php", "RAN page SN=/sub/page.php PI= "),
        ("/sub/page.php/x/y", "RAN page SN=/sub/page.php PI=/x/y "),
        ("/sub/", "RAN subindex SN=/sub/index.php "),
        ("/", "RAN front SN=/index.php "),
        (
            "/pretty/url?q=1",
            "RAN front SN=/index.php PI= QS=q=1 RU=/pretty/url?q=1",
        ),
        ("/missing.php", "RAN front SN=/index.php "),
        ("/logo.txt", "a logo"),
        ("/plain/", "plain index"),
    ];
    for (path, want) in expect {
        let (status, body) = body_of(&server, path);
        assert_eq!(status, 200, "{path}: {body}");
        assert!(body.starts_with(want), "{path}: {body}");
    }
    let r = server.get("/sub");
    assert_eq!(r.status, 301, "{r:?}");
    assert_eq!(r.header("location"), Some("/sub/"));
    for path in ["/sub/PAGE.PHP", "/sub/page.php.", "/sub/page.phps"] {
        let (_, body) = body_of(&server, path);
        assert!(!body.contains(PHP_SECRET), "{path}: {body}");
    }
}

/// `deny = true` answers 403 for everything under its matcher, even where
/// a script route would otherwise run the file (nginx `deny all`).
#[test]
fn a_deny_route_refuses_its_prefix_before_any_script_route() {
    let dir = TempDir::new("route-deny");
    dir.mkdir("www/inc");
    dir.write("www/inc/conf.php", php_page("inc"));
    dir.write("www/inc/notes.txt", "private\n");
    dir.write("www/ok.php", php_page("ok"));
    let cfg = config(
        &dir,
        "[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nsuffix = \".php\"\nfastcgi = { pool = \"php\" }\n\n\
         [[site.route]]\nprefix = \"/inc/\"\ndeny = true\n",
    );
    let server = Server::with_config(&cfg);
    for path in ["/inc/conf.php", "/inc/notes.txt", "/inc/"] {
        let (status, body) = body_of(&server, path);
        assert_eq!(status, 403, "{path}: {body}");
        assert!(!body.contains("private") && !body.contains("RAN"), "{body}");
    }
    assert!(body_of(&server, "/ok.php").1.starts_with("RAN ok"));
}

/// Paths with a dot-segment name (`.git`, `.env`, `.htpasswd`) are refused
/// by default; `/.well-known/` (RFC 8615) is served; `allow_dotfiles`
/// serves them all.
#[test]
fn dotfiles_are_refused_by_default_except_well_known() {
    let dir = TempDir::new("route-dot");
    dir.mkdir("www/.git");
    dir.mkdir("www/.well-known");
    dir.write("www/.git/config", "[core]\n");
    dir.write("www/.env", "DB_PASSWORD=x\n");
    dir.write("www/.well-known/security.txt", "Contact: x\n");
    let site = |allow: bool| {
        dir.config(
            "stoa.toml",
            &format!(
                "\
                 [[site]]\nroot = \"www\"\nallow_dotfiles = {allow}\n"
            ),
        )
    };
    let server = Server::with_config(&site(false));
    assert_eq!(server.get("/.git/config").status, 403);
    assert_eq!(server.get("/.env").status, 403);
    assert_eq!(server.get("/x/%2egit/config").status, 403);
    assert_eq!(server.get("/.well-known/security.txt").status, 200);
    drop(server);
    let server = Server::with_config(&site(true));
    assert_eq!(server.get("/.git/config").status, 200);
    assert_eq!(server.get("/.env").text(), "DB_PASSWORD=x\n");
}

/// A prefix mapped to one script (Apache `ScriptAlias /cgit
/// /usr/lib/cgit/cgit.cgi`): SCRIPT_NAME is the prefix, the rest of the
/// path is PATH_INFO (RFC 3875 §4.1.5, §4.1.13), and the route's `env`
/// reaches the script.
#[test]
fn a_cgi_script_route_runs_one_program_for_a_whole_prefix_with_its_env() {
    let dir = TempDir::new("route-script");
    dir.mkdir("www");
    dir.mkdir("bin");
    let script = dir.write(
        "bin/app.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n\
         echo \"SN=$SCRIPT_NAME PI=$PATH_INFO C=$APP_CONFIG QS=$QUERY_STRING\"\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "\
             [[site]]\nroot = \"www\"\n\n[[site.route]]\nprefix = \"/cgit\"\n\
             cgi = {{ script = \"{}\", env = {{ APP_CONFIG = \"/etc/apprc\" }} }}\n",
            script.display()
        ),
    );
    let server = Server::with_config(&cfg);
    let (s, body) = body_of(&server, "/cgit/repo.git/tree/?h=main");
    assert_eq!(s, 200, "{body}");
    assert_eq!(body, "SN=/cgit PI=/repo.git/tree/ C=/etc/apprc QS=h=main\n");
    let (_, body) = body_of(&server, "/cgit");
    assert_eq!(body, "SN=/cgit PI= C=/etc/apprc QS=\n");
    // `/cgitx` is not under the prefix `/cgit`.
    assert_eq!(server.get("/cgitx").status, 404);
}

/// `alias` maps the part of the path after the prefix into another
/// directory (nginx `alias`), and nothing outside it is reachable.
#[test]
fn an_alias_route_maps_the_rest_of_the_path_into_its_directory() {
    let dir = TempDir::new("route-alias");
    dir.mkdir("www");
    dir.mkdir("shared/css");
    dir.write("shared/css/site.css", "h1{}");
    dir.write("secret.txt", "no\n");
    let cfg = dir.config(
        "stoa.toml",
        "\
         [[site]]\nroot = \"www\"\n\n[[site.route]]\nprefix = \"/assets/\"\nalias = \"shared\"\n",
    );
    let server = Server::with_config(&cfg);
    let (s, body) = body_of(&server, "/assets/css/site.css");
    assert_eq!((s, body.as_str()), (200, "h1{}"));
    assert_eq!(server.get("/assets/../secret.txt").status, 404);
    assert_eq!(server.get("/assets/css").status, 301);
    assert_eq!(
        server.get("/assets/css").header("location"),
        Some("/assets/css/")
    );
}

/// `[[site.rewrite]]` (DokuWiki's `userewrite = 1` rules): the rule's
/// query comes first, the request's follows; REQUEST_URI stays the
/// client's; the rewritten path is routed like any request.
#[test]
fn a_rewrite_maps_a_pretty_url_onto_a_script_and_keeps_the_query() {
    let dir = TempDir::new("route-rewrite");
    dir.mkdir("www/lib/exe");
    dir.write("www/lib/exe/fetch.php", php_page("fetch"));
    let cfg = config(
        &dir,
        "[[site]]\nroot = \"www\"\n\n\
         [[site.rewrite]]\nfrom = \"^/_media/(.*)$\"\nto = \"/lib/exe/fetch.php?media=$1\"\n\n\
         [[site.route]]\nsuffix = \".php\"\nfastcgi = { pool = \"php\" }\n",
    );
    let server = Server::with_config(&cfg);
    let (s, body) = body_of(&server, "/_media/wiki:logo.png?w=20");
    assert_eq!(s, 200, "{body}");
    assert!(
        body.starts_with(
            "RAN fetch SN=/lib/exe/fetch.php PI= QS=media=wiki:logo.png&w=20 \
             RU=/_media/wiki:logo.png?w=20"
        ),
        "{body}"
    );
}

/// `try_files` (nginx): the first existing file is served by the route's
/// handler; otherwise the last entry is routed as a URI with
/// `$uri`/`$query_string` expanded, or answered with its status.
#[test]
fn try_files_serves_the_first_file_present_then_falls_back_to_a_uri_or_status() {
    let dir = TempDir::new("route-try");
    dir.mkdir("www/docs");
    dir.write("www/page.html", "a page\n");
    dir.write("www/index.php", php_page("fc"));
    dir.write("www/docs/a.html", "doc a\n");
    let cfg = config(
        &dir,
        "[[site]]\nroot = \"www\"\n\n\
         [[site.route]]\nsuffix = \".php\"\nfastcgi = { pool = \"php\" }\n\n\
         [[site.route]]\nprefix = \"/docs/\"\nstatic = {}\ntry_files = [\"$uri\", \"$uri.html\", \"=410\"]\n\n\
         [[site.route]]\nprefix = \"/\"\nstatic = {}\n\
         try_files = [\"$uri\", \"$uri.html\", \"/index.php?route=$uri&$query_string\"]\n",
    );
    let server = Server::with_config(&cfg);
    assert_eq!(body_of(&server, "/page.html"), (200, "a page\n".into()));
    assert_eq!(body_of(&server, "/page"), (200, "a page\n".into()));
    let (s, body) = body_of(&server, "/some/route?x=1");
    assert_eq!(s, 200, "{body}");
    assert!(
        body.starts_with("RAN fc SN=/index.php PI= QS=route=/some/route&x=1 RU=/some/route?x=1"),
        "{body}"
    );
    assert_eq!(body_of(&server, "/docs/a"), (200, "doc a\n".into()));
    assert_eq!(server.get("/docs/b").status, 410);
}

/// A symlink out of the root is refused by default, with a log line naming
/// it; `follow_symlinks = true` follows it (Debian's DokuWiki layout).
#[test]
fn a_symlink_out_of_the_root_is_refused_and_logged_unless_follow_symlinks() {
    let dir = TempDir::new("route-symlink");
    dir.mkdir("www/lib");
    dir.mkdir("outside/tpl");
    dir.write("outside/tpl/style.css", "tpl{}");
    dir.symlink(dir.join("outside/tpl"), "www/lib/tpl");
    let site = |follow: bool| {
        dir.config(
            "stoa.toml",
            &format!(
                "\
                 [[site]]\nroot = \"www\"\nfollow_symlinks = {follow}\n"
            ),
        )
    };
    let server = Server::with_config(&site(false));
    let from = server.stderr().len();
    assert_eq!(server.get("/lib/tpl/style.css").status, 403);
    assert!(
        server.wait_stderr(
            from,
            "lib/tpl/style.css: a symlink leads out of the root",
            std::time::Duration::from_secs(5)
        ),
        "{}",
        server.stderr()
    );
    drop(server);
    let server = Server::with_config(&site(true));
    assert_eq!(
        body_of(&server, "/lib/tpl/style.css"),
        (200, "tpl{}".into())
    );
}

/// A site's index name that is a script under a CGI `dir` route is run
/// for the directory (Apache `DirectoryIndex index.cgi`, gitweb's layout);
/// a directory with none is still refused.
#[test]
fn a_cgi_script_named_as_the_index_runs_for_its_directory() {
    let dir = TempDir::new("route-cgi-index");
    dir.mkdir("www");
    dir.mkdir("cgi/empty");
    let script = dir.write(
        "cgi/index.cgi",
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\necho \"SN=$SCRIPT_NAME RU=$REQUEST_URI\"\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let cfg = dir.config(
        "stoa.toml",
        "[[site]]\nroot = \"www\"\nindex = [\"index.html\", \"index.cgi\"]\n\n\
         [[site.route]]\nprefix = \"/git/\"\ncgi = { dir = \"cgi\" }\n",
    );
    let server = Server::with_config(&cfg);
    assert_eq!(
        body_of(&server, "/git/?p=x"),
        (200, "SN=/git/index.cgi RU=/git/?p=x\n".into())
    );
    assert_eq!(server.get("/git/empty/").status, 403);
}
