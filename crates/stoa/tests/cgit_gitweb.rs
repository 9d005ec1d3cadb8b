//! Issue 9: Stoa in front of the real cgit and gitweb of Debian's packages,
//! as CGI/1.1 programs (RFC 3875), over a git repository the test makes.
//! Each test has its own cgitrc / gitweb config, passed through the route's
//! `env`, so nothing under /etc is read or written.
//!
//! Needs the Debian packages cgit, gitweb and git (installed by test.sh).

mod common;
mod real_apps;

use common::*;
use real_apps::*;

const CGIT: &str = "/usr/lib/cgit/cgit.cgi";
const GITWEB: &str = "/usr/share/gitweb/gitweb.cgi";

/// cgit as Debian's Apache configuration deploys it (`ScriptAlias /cgit/
/// /usr/lib/cgit/cgit.cgi/`, `Alias /cgit-css /usr/share/cgit/`), with
/// the cgitrc of the test.
fn cgit_site(tag: &str) -> (TempDir, Server, std::path::PathBuf, String) {
    require(CGIT, "cgit");
    let dir = TempDir::new(tag);
    let (repo, head) = make_repo(&dir, "demo");
    dir.mkdir("www");
    dir.mkdir("cache");
    let cgitrc = dir.write(
        "cgitrc",
        format!(
            "css=/cgit-css/cgit.css\nlogo=/cgit-css/cgit.png\nvirtual-root=/cgit/\n\
             cache-size=0\ncache-root={}\nsnapshots=tar.gz\nenable-index-links=1\n\
             root-title=Stoa cgit test\n\
             repo.url=demo\nrepo.path={}\nrepo.desc=a repository made by the test\n",
            dir.join("cache").display(),
            repo.display()
        ),
    );
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"www\"\n\n\
             [[site.route]]\nprefix = \"/cgit\"\n\
             cgi = {{ script = \"{CGIT}\", env = {{ CGIT_CONFIG = \"{}\" }} }}\n\n\
             [[site.route]]\nprefix = \"/cgit-css/\"\nalias = \"/usr/share/cgit\"\n",
            cgitrc.display()
        ),
    );
    let server = Server::with_config(&cfg);
    (dir, server, repo, head)
}

fn fail(server: &Server, what: &str, r: &Response) -> String {
    format!("{what}: {r:?}\nstoa stderr:\n{}", server.stderr())
}

/// Issue 9: cgit through `cgi = { script, env = { CGIT_CONFIG } }` on a
/// prefix (SCRIPT_NAME `/cgit`, the rest as PATH_INFO, RFC 3875 §4.1.5):
/// its repository index, a commit page, and its stylesheet through an
/// `alias` of /usr/share/cgit.
#[test]
fn cgit_lists_the_repository_and_shows_a_commit() {
    let (_dir, server, _repo, head) = cgit_site("cgit-pages");
    let r = server.get("/cgit/");
    assert_eq!(r.status, 200, "{}", fail(&server, "/cgit/", &r));
    let html = r.text();
    assert!(html.contains("Stoa cgit test"), "{html}");
    assert!(html.contains("href='/cgit/demo/'"), "{html}");
    assert!(html.contains("a repository made by the test"), "{html}");

    let r = server.get("/cgit/demo/");
    assert_eq!(r.status, 200, "{}", fail(&server, "/cgit/demo/", &r));
    assert!(r.text().contains("Say hello from the stoa test"));

    let r = server.get(&format!("/cgit/demo/commit/?id={head}"));
    assert_eq!(r.status, 200, "{}", fail(&server, "commit", &r));
    let html = r.text();
    assert!(html.contains("Say hello from the stoa test"), "{html}");
    assert!(html.contains(&head), "{html}");
    assert!(html.contains("puts(&quot;hello&quot;)") || html.contains("puts(\"hello\")"));

    let css = std::fs::read("/usr/share/cgit/cgit.css").expect("cgit.css");
    let r = server.get("/cgit-css/cgit.css");
    assert_eq!(r.status, 200, "{}", fail(&server, "css", &r));
    assert_eq!(r.body, css);
    assert!(r
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/css")));
}

/// Issue 9: a cgit snapshot streams through Stoa intact: the tar.gz of a
/// commit is byte-identical to what `git archive --format=tar.gz
/// --prefix=demo-ID/` makes of it.
///
/// Debian's cgit (built with git 2.39) and git 2.39 both compress with
/// git's internal `git archive gzip` (no name, no time in the header), so
/// the compressed bytes can be compared directly. Should a cgit linked
/// with another git, or a `tar.tar.gz.command` setting, ever compress
/// differently, the uncompressed tars are compared first, so the failure
/// says which one differs.
#[test]
fn cgit_snapshot_is_byte_identical_to_git_archive() {
    let (_dir, server, repo, head) = cgit_site("cgit-snapshot");
    let name = format!("demo-{head}");
    let r = server.get(&format!("/cgit/demo/snapshot/{name}.tar.gz"));
    assert_eq!(r.status, 200, "{}", fail(&server, "snapshot", &r));
    assert!(
        r.header("content-type")
            .is_some_and(|t| t.contains("gzip") || t.contains("x-gzip")),
        "{r:?}"
    );
    let expected = git_archive(
        &repo,
        &["--format=tar.gz", &format!("--prefix={name}/"), &head],
    );
    let got_tar = gunzip(&r.body);
    let want_tar = gunzip(&expected);
    assert!(got_tar.len() > 1024, "a tar of the two files");
    assert!(
        got_tar == want_tar,
        "the snapshot's tar differs from git archive's ({} vs {} bytes)",
        got_tar.len(),
        want_tar.len()
    );
    assert!(
        r.body == expected,
        "same tar, but the gzip bytes differ ({} vs {} bytes)",
        r.body.len(),
        expected.len()
    );
}

/// gitweb as Debian installs it (/usr/share/gitweb with `index.cgi`, its
/// `static/` files), with a GITWEB_CONFIG the test writes.
fn gitweb_site(tag: &str) -> (TempDir, Server, String) {
    require(GITWEB, "gitweb");
    let dir = TempDir::new(tag);
    let (_repo, head) = make_repo(&dir, "demo");
    dir.mkdir("www");
    dir.mkdir("gittmp");
    let conf = dir.write(
        "gitweb.conf",
        format!(
            "$projectroot = \"{}\";\n$git_temp = \"{}\";\n$site_name = \"Stoa gitweb test\";\n\
             @stylesheets = (\"static/gitweb.css\");\n$javascript = \"static/gitweb.js\";\n",
            dir.join("repos").display(),
            dir.join("gittmp").display()
        ),
    );
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"www\"\nindex = [\"index.cgi\"]\n\n\
             [[site.route]]\nprefix = \"/gitweb/\"\n\
             cgi = {{ dir = \"/usr/share/gitweb\", env = {{ GITWEB_CONFIG = \"{}\" }} }}\n\n\
             [[site.route]]\nprefix = \"/gitweb/static/\"\nalias = \"/usr/share/gitweb/static\"\n",
            conf.display()
        ),
    );
    let server = Server::with_config(&cfg);
    (dir, server, head)
}

/// Issue 9: gitweb's project list and a commit view, gitweb run as the
/// directory's `index.cgi` (Apache `DirectoryIndex index.cgi`) with
/// GITWEB_CONFIG from the route's `env`; its stylesheet from `static/`.
#[test]
fn gitweb_lists_projects_and_shows_a_commit() {
    let (_dir, server, head) = gitweb_site("gitweb");
    let r = server.get("/gitweb/");
    assert_eq!(r.status, 200, "{}", fail(&server, "/gitweb/", &r));
    let html = r.text();
    assert!(html.contains("Stoa gitweb test"), "{html}");
    assert!(html.contains("demo.git"), "{html}");
    assert!(html.contains("a repository made by the test"), "{html}");

    let r = server.get(&format!("/gitweb/?p=demo.git;a=commit;h={head}"));
    assert_eq!(r.status, 200, "{}", fail(&server, "commit", &r));
    let html = r.text();
    assert!(html.contains("Say hello from the stoa test"), "{html}");
    assert!(html.contains(&head), "{html}");
    assert!(html.contains("src/hello.c"), "{html}");

    // gitweb.cgi by its own name runs too, with the same answer.
    let r = server.get("/gitweb/gitweb.cgi?p=demo.git;a=summary");
    assert_eq!(r.status, 200, "{}", fail(&server, "gitweb.cgi", &r));
    assert!(r.text().contains("Say hello from the stoa test"));

    let css = std::fs::read("/usr/share/gitweb/static/gitweb.css").expect("gitweb.css");
    let r = server.get("/gitweb/static/gitweb.css");
    assert_eq!(r.status, 200, "{}", fail(&server, "css", &r));
    assert_eq!(r.body, css);
}
