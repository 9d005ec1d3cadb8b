//! The routing rule, in process: `config::from_str` then `route::pick`,
//! no server. Routes answer with distinct `respond` statuses, so what
//! `pick` chose reads as a number (docs/CONFIG.md, "Route order").

use super::{pick, Pick};
use crate::config::{from_str, Overrides, Runtime};
use crate::handler::Handler;
use stoa_h1::{Framing, Method, RequestHead, Version};

fn runtime(routes: &str) -> Runtime {
    let d = std::env::temp_dir().join(format!("stoa-route-order-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let text = format!("[[site]]\nroot = {:?}\n{routes}", d.display().to_string());
    from_str(&text, "t.toml", &d, &Overrides::default()).unwrap()
}

fn head(target: &str) -> RequestHead {
    let host: (&[u8], &[u8]) = (b"Host", b"example.com");
    RequestHead::from_parts(Method::Get, target.as_bytes(), Version::Http11, [host])
}

/// What `pick` chose for `target`: a `respond` route's status, a
/// redirect's path, `static` for the site's root, or another status.
fn chosen(rt: &Runtime, h: &RequestHead) -> String {
    match pick(h, rt).0 {
        Pick::Run(Handler::Respond(cfg), _) => cfg.status().to_string(),
        Pick::Run(Handler::Redirect(_), norm) => format!("redirect {norm}"),
        Pick::Run(Handler::Static(_), _) => "static".into(),
        Pick::Status(s) => format!("status {s}"),
        _ => "other".into(),
    }
}

fn route(matcher: &str, status: u16) -> String {
    format!("[[site.route]]\n{matcher}\nrespond = {{ status = {status} }}\n")
}

#[test]
fn deny_routes_come_first_whatever_their_matcher() {
    let rt = runtime(&format!(
        "{}{}[[site.route]]\nregex = '^/a/secret'\ndeny = true\n",
        route("suffix = \".txt\"", 201),
        route("prefix = \"/a/\"", 202),
    ));
    assert_eq!(chosen(&rt, &head("/a/secret.txt")), "status 403");
    assert_eq!(chosen(&rt, &head("/a/public.txt")), "201");
}

/// nginx: regex locations in file order, the first that matches wins,
/// before any prefix location, however long.
#[test]
fn suffix_and_regex_routes_are_tried_in_file_order_before_any_prefix() {
    let rt = runtime(&format!(
        "{}{}{}{}{}",
        route("prefix = \"/a/b/c/\"", 201),
        route("regex = '^/a/'", 202),
        route("suffix = \".css\"", 203),
        route("regex = '(?i)\\.(png|jpe?g)$'", 204),
        route("prefix = \"/\"", 205),
    ));
    for (path, want) in [
        ("/a/b/c/x.css", "202"),
        ("/b/x.css", "203"),
        ("/b/x.PNG", "204"),
        ("/a/b/c/x", "202"),
        ("/b/c/x", "205"),
    ] {
        assert_eq!(chosen(&rt, &head(path)), want, "{path}");
    }
}

#[test]
fn prefixes_are_tried_longest_first_and_the_root_takes_the_rest() {
    let rt = runtime(&format!(
        "{}{}",
        route("prefix = \"/a/\"", 201),
        route("prefix = \"/a/b/\"", 202),
    ));
    assert_eq!(chosen(&rt, &head("/a/b/x")), "202");
    assert_eq!(chosen(&rt, &head("/a/x")), "201");
    assert_eq!(chosen(&rt, &head("/x")), "static");
}

/// A regex is searched in the decoded, normalized path: `%2e` and `//`
/// cannot slip past it (as for suffixes).
#[test]
fn a_regex_matches_the_decoded_normalized_path() {
    let rt = runtime(&route("regex = '^/admin/.*\\.php$'", 201));
    for path in [
        "/admin/x.php",
        "/admin/x%2ephp",
        "//admin/./x.php",
        "/y/../admin/x.php",
    ] {
        assert_eq!(chosen(&rt, &head(path)), "201", "{path}");
    }
}

/// A rewrite runs before routing, and a redirect's `$uri` and captures
/// are taken from the rewritten path.
#[test]
fn a_redirect_route_sees_the_path_after_rewrites() {
    let rt = runtime(
        "[[site.rewrite]]\nfrom = '^/r/(.*)$'\nto = '/old/$1'\n\
         [[site.route]]\nregex = '^/old/(.*)$'\nredirect = { to = \"/new/$1\" }\n",
    );
    assert_eq!(chosen(&rt, &head("/r/x")), "redirect /old/x");
}

/// nginx `client_max_body_size` per location: a `Content-Length` over
/// the chosen route's limit is 413 before its handler; the route's limit
/// may be larger than the server's, and a site's applies to its routes.
#[test]
fn a_content_length_is_checked_against_the_chosen_routes_limit() {
    let rt = runtime(&format!(
        "max_body_bytes = 100\n{}max_body_bytes = 10\n{}max_body_bytes = \"1 GiB\"\n{}",
        route("prefix = \"/small/\"", 201),
        route("prefix = \"/big/\"", 202),
        route("prefix = \"/site/\"", 203),
    ));
    let with_body = |path: &str, n: u64| {
        let mut h = head(path);
        h.framing = Framing::Length(n);
        chosen(&rt, &h)
    };
    assert_eq!(with_body("/small/", 10), "201");
    assert_eq!(with_body("/small/", 11), "status 413");
    assert_eq!(with_body("/big/", 1 << 29), "202");
    assert_eq!(with_body("/site/", 100), "203");
    assert_eq!(with_body("/site/", 101), "status 413");
    assert_eq!(with_body("/other", 101), "status 413");
    // Beyond every limit: refused before routing.
    assert_eq!(with_body("/big/", (1 << 30) + 1), "status 413");
}

/// Scripts are never served as source because static routes refuse the
/// suffixes of script routes; a regex names none, so `stoa check` says
/// so for an extension regex running FastCGI without `split_path`.
#[test]
fn an_extension_regex_running_fastcgi_without_split_path_is_warned_about() {
    let d = std::env::temp_dir().join(format!("stoa-route-order-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let warnings = |fastcgi: &str| {
        let text = format!(
            "[[pool]]\nname = \"p\"\naddress = [\"127.0.0.1:9000\"]\n\
             [[site]]\nroot = {:?}\n\
             [[site.route]]\nregex = '\\.php$'\nfastcgi = {fastcgi}\n\
             [[site.route]]\nregex = '^/api/'\nfastcgi = {{ pool = \"p\" }}\n",
            d.display().to_string()
        );
        from_str(&text, "t.toml", &d, &Overrides::default())
            .unwrap()
            .warnings
    };
    let w = warnings("{ pool = \"p\" }");
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("route[0]: a `fastcgi` route on a `regex`"),
        "{w:?}"
    );
    assert_eq!(
        warnings("{ pool = \"p\", split_path = \".php\" }"),
        Vec::<String>::new()
    );
}
