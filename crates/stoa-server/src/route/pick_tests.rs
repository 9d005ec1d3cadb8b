//! Routing and its phases checked in-process: a configuration from text
//! (`config::from_str`), a request head, and what `pick` decides — no
//! server, no socket. Each test states one routing rule.

use super::{pick, pick_request, pick_unguarded, Pick};
use crate::config::{from_str, Overrides, Runtime};
use crate::exchange::Edge;
use crate::handler::Handler;
use crate::local::AccessLog;
use std::path::{Path, PathBuf};
use stoa_h1::{Method, RequestHead, RequestLimits, Version};

/// A document root of its own for each test: `index.html`, `a/x.txt`,
/// `a/b/x`, `x.php`, `index.php`, `style.css`, `dir/index.php`,
/// `.git/config`, `.well-known/acme-challenge/t`.
fn docroot(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stoa-pick-{}-{name}", std::process::id()));
    for f in [
        "index.html",
        "a/x.txt",
        "a/b/x",
        "x.php",
        "index.php",
        "style.css",
        "dir/index.php",
        ".git/config",
        ".well-known/acme-challenge/t",
    ] {
        let p = d.join(f);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, "x").expect("write");
    }
    d
}

/// A runtime with a FastCGI pool `app` (never started: routing only
/// reads its index) and one site over `root` with `body` appended.
fn runtime(root: &Path, body: &str) -> Runtime {
    let text = format!(
        "[[pool]]\nname = \"app\"\naddress = [\"127.0.0.1:9\"]\n[[site]]\nroot = {:?}\n{body}",
        root.display().to_string()
    );
    match from_str(&text, "t.toml", root, &Overrides::default()) {
        Ok(rt) => rt,
        Err(e) => panic!("{e}\n{text}"),
    }
}

fn get(target: &str, host: &str) -> RequestHead {
    RequestHead::from_parts(
        Method::Get,
        target.as_bytes(),
        Version::Http11,
        [(&b"host"[..], host.as_bytes())],
    )
}

/// A head parsed from the wire (framing included).
fn parsed(text: &str) -> RequestHead {
    let mut h = RequestHead::default();
    let limits = RequestLimits {
        max_head_bytes: 1 << 16,
        max_uri_bytes: 1 << 14,
    };
    match h.parse(text.as_bytes(), &limits) {
        Ok(Some(_)) => h,
        other => panic!("{text:?}: {other:?}"),
    }
}

/// What routing decided, in words: `static /a/x.txt`, `status 403`,
/// `access`...; and the target the handler sees when routing changed it.
fn decided(p: &Pick<'_>, changed: Option<&RequestHead>) -> (String, Option<String>) {
    let what = match p {
        Pick::Run(h, norm) => {
            let kind = match h {
                Handler::Static(_) => "static",
                Handler::Cgi(_) => "cgi",
                Handler::FastCgi(_) => "fastcgi",
                Handler::Proxy(_) => "proxy",
                Handler::Status(_) => "status-page",
                Handler::Ssi(_) => "ssi",
                Handler::Lua(_) => "lua",
                Handler::Php(_) => "php",
                Handler::Deny => "deny",
                Handler::Redirect(_) => "redirect",
                Handler::Respond(_) => "respond",
            };
            format!("{kind} {norm}")
        }
        Pick::Access(_) => "access".to_owned(),
        Pick::Checked(..) => "checked".to_owned(),
        Pick::Status(s) => format!("status {s}"),
        Pick::HttpsRedirect => "https".to_owned(),
        Pick::OptionsStar => "options *".to_owned(),
        Pick::AcmeChallenge(_) => "acme challenge".to_owned(),
    };
    let target = changed.map(|h| String::from_utf8_lossy(h.target()).into_owned());
    (what, target)
}

fn route(rt: &Runtime, target: &str) -> String {
    let (p, changed) = pick(&get(target, "example.com"), rt);
    decided(&p, changed.as_ref()).0
}

/// docs/CONFIG.md's routing rule: deny routes first, then suffix routes
/// in file order, then prefix routes longest first; no route: the site's
/// root. The file order of prefixes does not matter (nginx's longest
/// prefix match).
#[test]
fn deny_routes_then_suffixes_then_the_longest_prefix_then_the_sites_root() {
    let d = docroot("rule");
    let rt = runtime(
        &d,
        "[[site.route]]\nprefix = \"/a/\"\nstatic = {}\n\
         [[site.route]]\nprefix = \"/a/b/\"\nfastcgi = { pool = \"app\" }\n\
         [[site.route]]\nsuffix = \".php\"\nfastcgi = { pool = \"app\" }\n\
         [[site.route]]\nprefix = \"/a/b/secret/\"\ndeny = true\n",
    );
    assert_eq!(route(&rt, "/a/x.txt"), "static /a/x.txt");
    assert_eq!(route(&rt, "/a/b/x"), "fastcgi /a/b/x");
    assert_eq!(route(&rt, "/a/x.php"), "fastcgi /a/x.php");
    assert_eq!(route(&rt, "/a/b/secret/x.php"), "status 403");
    assert_eq!(route(&rt, "/style.css"), "static /style.css");
    // Routes match the decoded, normalized path.
    assert_eq!(route(&rt, "/a/%62/./x"), "fastcgi /a/b/x");
    assert_eq!(route(&rt, "/a/x%2ePHP"), "fastcgi /a/x.PHP");
}

/// Paths with a segment starting with '.' are refused (403) unless the
/// site allows them; `/.well-known/` (RFC 8615) is always served.
#[test]
fn dotfiles_are_refused_but_well_known_is_served() {
    let d = docroot("dot");
    let rt = runtime(&d, "");
    assert_eq!(route(&rt, "/.git/config"), "status 403");
    assert_eq!(
        route(&rt, "/.well-known/acme-challenge/t"),
        "static /.well-known/acme-challenge/t"
    );
    let rt = runtime(&d, "allow_dotfiles = true\n");
    assert_eq!(route(&rt, "/.git/config"), "static /.git/config");
}

/// nginx `rewrite`: the path the handler sees changes, and the request's
/// own query follows the rule's.
#[test]
fn a_rewrite_changes_the_target_and_appends_the_requests_query() {
    let d = docroot("rewrite");
    let rt = runtime(
        &d,
        "[[site.rewrite]]\nfrom = \"^/old/(.*)$\"\nto = \"/a/$1?from=old\"\n",
    );
    let (p, changed) = pick(&get("/old/x.txt?q=1", "example.com"), &rt);
    assert_eq!(
        decided(&p, changed.as_ref()),
        (
            "static /a/x.txt".to_owned(),
            Some("/a/x.txt?from=old&q=1".to_owned())
        )
    );
}

/// nginx `try_files`: the first entry that names a file is served by the
/// route's handler; else the last entry routes again (here to PHP).
#[test]
fn try_files_falls_back_to_its_last_entry_through_routing() {
    let d = docroot("try");
    let rt = runtime(
        &d,
        "[[site.route]]\nsuffix = \".php\"\nfastcgi = { pool = \"app\" }\n\
         [[site.route]]\nprefix = \"/\"\nstatic = {}\n\
         try_files = [\"$uri\", \"/index.php?q=$uri\"]\n",
    );
    assert_eq!(route(&rt, "/style.css"), "static /style.css");
    let (p, changed) = pick(&get("/missing", "example.com"), &rt);
    assert_eq!(
        decided(&p, changed.as_ref()),
        (
            "fastcgi /index.php".to_owned(),
            Some("/index.php?q=/missing".to_owned())
        )
    );
}

/// Caddy's `php_fastcgi`: a `.php` file runs, another file is static, a
/// directory runs its index.php, anything else the front controller.
#[test]
fn the_php_preset_runs_scripts_and_serves_other_files() {
    let d = docroot("php");
    let rt = runtime(
        &d,
        "[[site.route]]\nprefix = \"/\"\nphp = { pool = \"app\" }\n",
    );
    assert_eq!(route(&rt, "/x.php"), "fastcgi /x.php");
    assert_eq!(route(&rt, "/x.php/extra"), "fastcgi /x.php/extra");
    assert_eq!(route(&rt, "/style.css"), "static /style.css");
    assert_eq!(route(&rt, "/dir/"), "fastcgi /dir/index.php");
    assert_eq!(route(&rt, "/no/such/page"), "fastcgi /index.php");
}

/// The site is chosen by Host (case-insensitive, port ignored, `*.`
/// wildcards); an unknown Host gets the first site.
#[test]
fn the_host_chooses_the_site_and_an_unknown_host_gets_the_first() {
    let d = docroot("hosts");
    let rt = runtime(
        &d,
        "hosts = [\"a.example\"]\n[[site.route]]\nprefix = \"/\"\ndeny = true\n\
         [[site]]\nhosts = [\"*.b.example\"]\nroot = \".\"\n",
    );
    let site = |host: &str| {
        let (p, changed) = pick(&get("/style.css", host), &rt);
        decided(&p, changed.as_ref()).0
    };
    assert_eq!(site("A.Example:8080"), "status 403");
    assert_eq!(site("www.b.example"), "static /style.css");
    assert_eq!(site("elsewhere.example"), "status 403");
}

/// Before routing: a body over `max_body_bytes` is 413 (nginx
/// `client_max_body_size`); `*` is for OPTIONS only (RFC 9112 §3.2.4).
#[test]
fn limits_and_the_asterisk_form_are_answered_before_any_site() {
    let d = docroot("limits");
    let rt = runtime(&d, "");
    let (p, _) = pick(
        &parsed("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999\r\n\r\n"),
        &rt,
    );
    assert_eq!(decided(&p, None).0, "status 413");
    let (p, _) = pick(&parsed("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), &rt);
    assert_eq!(decided(&p, None).0, "options *");
    let (p, _) = pick(&parsed("GET * HTTP/1.1\r\nHost: a\r\n\r\n"), &rt);
    assert_eq!(decided(&p, None).0, "status 400");
}

/// The access phase: a route with a check (here a FastCGI Authorizer,
/// FastCGI 1.0 §6.3) is picked as `Access` first; once the check lets the
/// request through, the handler is picked. A route without checks goes
/// straight to its handler.
#[test]
fn a_route_with_access_checks_runs_the_access_phase_before_its_handler() {
    let d = docroot("access");
    let rt = runtime(
        &d,
        "[[site.route]]\nprefix = \"/a/\"\nstatic = {}\nauthorizer = \"app\"\n",
    );
    let head = get("/a/x.txt", "example.com");
    match pick(&head, &rt).0 {
        Pick::Access(a) => assert!(!a.is_empty()),
        other => panic!("not the access phase: {:?}", decided(&other, None)),
    }
    let (p, _) = pick_unguarded(&head, &rt);
    assert_eq!(decided(&p, None).0, "static /a/x.txt");
    assert_eq!(route(&rt, "/style.css"), "static /style.css");
}

/// The route routing settles on gives the exchange its `Edge` (here its
/// own access log); the site's root has the site's; a request no site
/// took has `Edge::NONE`.
#[test]
fn the_chosen_routes_edge_comes_back_with_the_pick() {
    let d = docroot("edge");
    let rt = runtime(
        &d,
        "[[site.route]]\nprefix = \"/a/\"\nstatic = {}\naccess_log = false\n",
    );
    let edge_of = |head: &RequestHead| {
        let (mut hsts, mut edge) = (None, Edge::none());
        pick_request(head, &rt, false, &mut hsts, &mut edge);
        edge
    };
    assert_eq!(
        edge_of(&get("/a/x.txt", "h")).access_log,
        Some(AccessLog::OFF)
    );
    assert_eq!(edge_of(&get("/style.css", "h")).access_log, None);
    let nowhere = edge_of(&parsed("GET * HTTP/1.1\r\nHost: a\r\n\r\n"));
    assert!(std::ptr::eq(nowhere, Edge::none()));
}

/// `https_redirect`: cleartext requests are sent to https (308), ACME
/// HTTP-01 challenges excepted (RFC 8555 §8.3); over TLS the site's
/// `hsts` comes back to be sent (RFC 6797 §7.2: over TLS only).
#[test]
fn transport_rules_redirect_cleartext_and_give_hsts_over_tls() {
    let d = docroot("tls");
    let rt = runtime(&d, "https_redirect = true\nhsts = \"max-age=60\"\n");
    let with = |target: &str, tls: bool| {
        let (mut hsts, mut edge) = (None, Edge::none());
        let (p, _) = pick_request(&get(target, "h"), &rt, tls, &mut hsts, &mut edge);
        (decided(&p, None).0, hsts.map(<[u8]>::to_vec))
    };
    assert_eq!(with("/style.css", false), ("https".to_owned(), None));
    assert_eq!(
        with("/.well-known/acme-challenge/t", false).0,
        "static /.well-known/acme-challenge/t"
    );
    assert_eq!(
        with("/style.css", true),
        ("static /style.css".to_owned(), Some(b"max-age=60".to_vec()))
    );
}

/// A pending ACME HTTP-01 token is answered with its key authorization
/// on cleartext before `https_redirect` (RFC 8555 §8.3); other paths
/// under the prefix, and requests over TLS, route as before.
#[test]
fn a_pending_http01_token_is_answered_before_the_https_redirect_rfc8555_8_3() {
    let d = docroot("acme");
    let text = format!(
        "listen = [\"127.0.0.1:0\"]\n[[tls]]\nlisten = [\"127.0.0.1:0\"]\nhosts = [\"a.test\"]\n\
         acme = {{ directory = \"https://ca.test/dir\", storage = {:?} }}\n\
         [[site]]\nroot = {:?}\nhttps_redirect = true\n",
        d.join("acme-storage").display().to_string(),
        d.display().to_string()
    );
    let rt = match from_str(&text, "t.toml", &d, &Overrides::default()) {
        Ok(rt) => rt,
        Err(e) => panic!("{e}\n{text}"),
    };
    crate::acme::tokens::put("pick-tok", "pick-tok.thumbprint");
    let with = |target: &str, tls: bool| {
        let (mut hsts, mut edge) = (None, Edge::none());
        let (p, _) = pick_request(&get(target, "a.test"), &rt, tls, &mut hsts, &mut edge);
        match p {
            Pick::AcmeChallenge(answer) => answer,
            p => decided(&p, None).0,
        }
    };
    assert_eq!(
        with("/.well-known/acme-challenge/pick-tok", false),
        "pick-tok.thumbprint"
    );
    assert_eq!(
        with("/.well-known/acme-challenge/other", false),
        "static /.well-known/acme-challenge/other"
    );
    assert_eq!(with("/style.css", false), "https");
    assert_eq!(
        with("/.well-known/acme-challenge/pick-tok", true),
        "static /.well-known/acme-challenge/pick-tok"
    );
    crate::acme::tokens::remove("pick-tok");
}

/// Address rules and limits before a static file: routing chooses the
/// handler at once (`Pick::Checked`), so the checks cost no second
/// routing and no future. A check that may wait (basic auth: bcrypt), or
/// a site whose static files an index script could turn into a script
/// run, takes the access phase first.
#[test]
fn checks_that_never_wait_before_a_static_file_run_without_routing_again() {
    let d = docroot("checked");
    let users = d.join("htpasswd");
    std::fs::write(&users, "a:{SHA}CEo1Ae3vaEXy8eQZjsOiuBz1xrw=\n").expect("htpasswd");
    let keys = "address_rules = [\"deny 10.0.0.0/8\"]\nlimit_requests = { rate = \"5/s\" }\n";
    let rt = runtime(
        &d,
        &format!(
            "{keys}\n[[site.route]]\nprefix = \"/a/\"\nstatic = {{}}\n\
             basic_auth = {{ realm = \"r\", users = {:?} }}\n",
            users.display().to_string()
        ),
    );
    let what = |rt: &Runtime, path: &str| decided(&pick(&get(path, "x"), rt).0, None).0;
    assert_eq!(what(&rt, "/style.css"), "checked");
    assert_eq!(what(&rt, "/a/x.txt"), "access");
    let rt = runtime(
        &d,
        &format!("{keys}\n[[site.route]]\nsuffix = \".php\"\nfastcgi = {{ pool = \"app\" }}\n"),
    );
    assert_eq!(what(&rt, "/style.css"), "access");
    assert_eq!(what(&rt, "/x.php"), "access");
}
