//! Directory traversal: no request may read outside the document root
//! (RFC 3986 §5.2.4 dot segments; CVE-2001-0333 double decoding,
//! CVE-2021-41773 encoded dots, CVE-2000-0884 backslashes, symlink escapes).

mod common;
use common::*;

const SECRET: &str = "TOP-SECRET-outside-the-root";

/// A root `www/` with an outside sibling holding secrets, and symlinks from
/// inside the root to outside it. Autoindex is on, so that a listing of an
/// outside directory would show.
fn site() -> (TempDir, Server) {
    let d = TempDir::new("traversal");
    d.write("secret.txt", SECRET);
    d.write("outside/secret2.txt", SECRET);
    d.write("outside/index.html", SECRET);
    d.write("www/a.txt", "alpha\n");
    d.write("www/sub/b.txt", "bravo\n");
    d.symlink(d.join("secret.txt"), "www/link.txt");
    d.symlink("../secret.txt", "www/rellink.txt");
    d.symlink(d.join("outside"), "www/linkdir");
    d.symlink("../outside", "www/rellinkdir");
    d.symlink("a.txt", "www/alias.txt");
    let cfg = d.config("stoa.toml", "[[site]]\nroot = \"www\"\nautoindex = true\n");
    let s = Server::with_config(&cfg);
    (d, s)
}

fn assert_refused(s: &Server, target: &str, allowed: &[u16]) {
    let r = s.get(target);
    assert!(
        allowed.contains(&r.status),
        "{target}: status {} not in {allowed:?}: {r:?}",
        r.status
    );
    assert!(
        !r.text().contains(SECRET) && !r.text().contains("secret2"),
        "{target}: the outside content leaked: {r:?}"
    );
}

#[test]
fn dot_dot_segments_above_the_root_are_refused_rfc3986_5_2_4() {
    let (_d, s) = site();
    for t in [
        "/../secret.txt",
        "/sub/../../secret.txt",
        "/./../secret.txt",
        "//../secret.txt",
        "/sub/./../.././secret.txt",
    ] {
        assert_refused(&s, t, &[400, 403, 404]);
    }
}

#[test]
fn percent_encoded_dots_are_refused_cve_2021_41773() {
    let (_d, s) = site();
    for t in [
        "/%2e%2e/secret.txt",
        "/%2E%2E/secret.txt",
        "/.%2e/secret.txt",
        "/%2e./secret.txt",
        "/sub/%2e%2e/%2e%2e/secret.txt",
        "/sub/.%2E/.%2e/secret.txt",
    ] {
        assert_refused(&s, t, &[400, 403, 404]);
    }
}

#[test]
fn encoded_slashes_are_refused_rfc3986_2_2() {
    let (_d, s) = site();
    for t in [
        "/..%2fsecret.txt",
        "/sub/..%2f..%2fsecret.txt",
        "/sub%2f..%2f..%2fsecret.txt",
        "/%2F..%2Fsecret.txt",
    ] {
        assert_refused(&s, t, &[400, 403, 404]);
    }
}

#[test]
fn double_encoded_dots_are_not_decoded_twice_cve_2001_0333() {
    let (_d, s) = site();
    for t in [
        "/%252e%252e/secret.txt",
        "/sub/%252e%252e%252f%252e%252e%252fsecret.txt",
    ] {
        assert_refused(&s, t, &[400, 403, 404]);
    }
}

#[test]
fn nul_bytes_are_refused_cwe_158() {
    let (_d, s) = site();
    for t in ["/a.txt%00.html", "/%00/../secret.txt", "/sub%00/b.txt"] {
        assert_refused(&s, t, &[400, 403, 404]);
    }
}

#[test]
fn backslashes_raw_or_encoded_are_refused_cve_2000_0884() {
    let (_d, s) = site();
    for t in [
        "/..\\secret.txt",
        "/sub\\..\\..\\secret.txt",
        "/%5c..%5csecret.txt",
        "/..%5csecret.txt",
        "/sub/..%5C..%5Csecret.txt",
    ] {
        assert_refused(&s, t, &[400, 403, 404]);
    }
}

#[test]
fn overlong_utf8_dots_are_refused_cve_2000_0884() {
    let (_d, s) = site();
    for t in ["/%c0%ae%c0%ae/secret.txt", "/%c0%af../secret.txt"] {
        assert_refused(&s, t, &[400, 403, 404]);
    }
}

#[test]
fn a_symlink_to_a_file_outside_the_root_is_not_followed() {
    let (_d, s) = site();
    assert_refused(&s, "/link.txt", &[403, 404]);
    assert_refused(&s, "/rellink.txt", &[403, 404]);
}

#[test]
fn a_symlink_to_a_directory_outside_the_root_is_not_followed() {
    let (_d, s) = site();
    for t in [
        "/linkdir/secret2.txt",
        "/linkdir/index.html",
        "/rellinkdir/secret2.txt",
        "/rellinkdir/index.html",
    ] {
        assert_refused(&s, t, &[403, 404]);
    }
}

#[test]
fn a_symlink_to_a_directory_outside_the_root_is_neither_indexed_nor_listed() {
    let (_d, s) = site();
    // The directory holds index.html (would be served) and secret2.txt
    // (would be listed).
    for t in ["/linkdir/", "/rellinkdir/"] {
        assert_refused(&s, t, &[403, 404]);
    }
    // The redirect that adds the slash is harmless, but must not leak.
    assert_refused(&s, "/linkdir", &[301, 403, 404]);
}

#[test]
fn the_root_listing_does_not_show_what_outside_symlinks_contain() {
    let (_d, s) = site();
    let r = s.get("/");
    assert_eq!(r.status, 200);
    assert!(!r.text().contains(SECRET));
}

#[test]
fn dot_segments_that_stay_inside_the_root_are_resolved_rfc3986_5_2_4() {
    let (_d, s) = site();
    for t in [
        "/sub/../a.txt",
        "/sub/./../sub/b.txt",
        "/./a.txt",
        "/sub/%2e%2e/a.txt",
    ] {
        let r = s.get(t);
        assert_eq!(r.status, 200, "{t}: {r:?}");
    }
    assert_eq!(s.get("/sub/../a.txt").body, b"alpha\n");
}

#[test]
fn a_relative_symlink_that_stays_inside_the_root_is_served() {
    let (_d, s) = site();
    let r = s.get("/alias.txt");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, b"alpha\n");
}

#[test]
fn absolute_form_and_asterisk_targets_do_not_escape_the_root_rfc9112_3_2() {
    let (_d, s) = site();
    for t in ["http://t/../secret.txt", "http://t/%2e%2e/secret.txt", "*"] {
        assert_refused(&s, t, &[400, 403, 404]);
    }
}
