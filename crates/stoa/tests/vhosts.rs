//! Virtual hosts chosen by Host (RFC 9110 §7.2, host names compared
//! case-insensitively per RFC 3986 §3.2.2) and routes inside a site.

mod common;
use common::*;

fn site() -> (TempDir, Server) {
    let d = TempDir::new("vhosts");
    d.write("default/who.txt", "default\n");
    d.write("a/who.txt", "site a\n");
    d.write("wild/who.txt", "wildcard\n");
    d.write("assets/static/app.css", "css from assets\n");
    d.write("a/static/app.css", "css from site a\n");
    d.write("texts/who.txt", "suffix route\n");
    d.write("texts/static/note.txt", "note\n");
    let cfg = d.config(
        "stoa.toml",
        "[[site]]\nhosts = [\"default.test\"]\nroot = \"default\"\n\n\
         [[site]]\nhosts = [\"a.test\"]\nroot = \"a\"\n\n\
         [[site.route]]\nprefix = \"/static/\"\nstatic = { root = \"assets\" }\n\n\
         [[site]]\nhosts = [\"*.wild.test\"]\nroot = \"wild\"\n\n\
         [[site.route]]\nsuffix = \".txt\"\nstatic = { root = \"texts\" }\n",
    );
    let s = Server::with_config(&cfg);
    (d, s)
}

fn who(s: &Server, host: &str, path: &str) -> Response {
    s.request(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
}

#[test]
fn the_host_header_selects_the_site_rfc9110_7_2() {
    let (_d, s) = site();
    assert_eq!(who(&s, "a.test", "/who.txt").body, b"site a\n");
    assert_eq!(who(&s, "default.test", "/who.txt").body, b"default\n");
}

#[test]
fn the_port_in_host_is_ignored_rfc9110_7_2() {
    let (_d, s) = site();
    assert_eq!(who(&s, "a.test:8080", "/who.txt").body, b"site a\n");
}

#[test]
fn host_names_match_case_insensitively_rfc3986_3_2_2() {
    let (_d, s) = site();
    let r = who(&s, "A.Test", "/who.txt");
    assert_eq!(
        r.body, b"site a\n",
        "Host: A.Test went to the wrong site: {r:?}"
    );
    let r = who(&s, "X.WILD.TEST", "/static/note.txt");
    assert_eq!(r.body, b"note\n", "{r:?}");
}

#[test]
fn an_unknown_host_goes_to_the_first_site() {
    let (_d, s) = site();
    assert_eq!(who(&s, "elsewhere.test", "/who.txt").body, b"default\n");
    // HTTP/1.0 without Host too.
    let r = s.request(b"GET /who.txt HTTP/1.0\r\n\r\n");
    assert_eq!(r.body, b"default\n");
}

#[test]
fn a_wildcard_matches_subdomains_but_not_the_bare_domain() {
    let (_d, s) = site();
    assert_eq!(who(&s, "x.wild.test", "/static/note.txt").body, b"note\n");
    assert_eq!(
        who(&s, "deep.x.wild.test", "/static/note.txt").body,
        b"note\n"
    );
    assert_eq!(who(&s, "wild.test", "/who.txt").body, b"default\n");
}

#[test]
fn a_prefix_route_serves_the_whole_path_under_its_own_root() {
    let (_d, s) = site();
    let r = who(&s, "a.test", "/static/app.css");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"css from assets\n");
    // Outside the prefix, the site's root.
    assert_eq!(who(&s, "a.test", "/who.txt").body, b"site a\n");
}

#[test]
fn a_suffix_route_takes_matching_paths() {
    let (_d, s) = site();
    assert_eq!(who(&s, "x.wild.test", "/who.txt").body, b"suffix route\n");
}

#[test]
fn routes_of_one_site_do_not_apply_to_another() {
    let (_d, s) = site();
    assert_eq!(who(&s, "default.test", "/static/app.css").status, 404);
}

#[test]
fn an_absolute_form_authority_selects_the_site_not_host_rfc9112_3_2_2() {
    let (_d, s) = site();
    let r = s.request(b"GET http://a.test:81/who.txt HTTP/1.1\r\nHost: default.test\r\n\r\n");
    assert_eq!(r.body, b"site a\n", "{r:?}");
    let r = s.request(b"GET http://default.test/who.txt HTTP/1.1\r\nHost: a.test\r\n\r\n");
    assert_eq!(r.body, b"default\n", "{r:?}");
}
