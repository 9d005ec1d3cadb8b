//! Issue 9: Stoa in front of the real DokuWiki of Debian's `dokuwiki`
//! package (/usr/share/dokuwiki), run by a php-fpm the test starts with
//! its own pool. DokuWiki's configuration (DOKU_CONF) and data (savedir)
//! are private copies in the test's directory, chosen by an
//! `auto_prepend_file` of that pool, so nothing under /etc or /var/lib is
//! written and the tests run in parallel.
//!
//! Needs the Debian packages dokuwiki and php-fpm (installed by test.sh).

mod common;
mod real_apps;

use common::*;
use real_apps::*;
use std::path::{Path, PathBuf};

const DOKU: &str = "/usr/share/dokuwiki";
const USER: &str = "stoa";
const PASSWORD: &str = "stoa-wiki-pw";
/// bcrypt of PASSWORD (`password_hash(..., PASSWORD_BCRYPT)`), a format
/// DokuWiki's PassHash accepts.
const PASSWORD_HASH: &str = "$2y$04$PsmY5hxMFfmRCD3opFTeYOoQcIv3DKk2I/5jc3UR1axOtmC2JVfva";
const START_MARKER: &str = "Stoa start page marker";

/// Where DokuWiki lives in one test.
struct Wiki {
    server: Server,
    fpm: PhpFpm,
    root: PathBuf,
    data: PathBuf,
    _dir: TempDir,
}

struct WikiSetup<'a> {
    tag: &'a str,
    /// Serve a private `cp -a` of /usr/share/dokuwiki with `conf/` and
    /// `data/` inside it (the upstream tarball's layout), instead of
    /// Debian's /usr/share/dokuwiki itself.
    private_copy: bool,
    follow_symlinks: bool,
    /// More lines of `conf/local.php`.
    local: &'a str,
    /// More `[[site.rewrite]]` / `[[site.route]]` tables.
    site_extra: &'a str,
    /// Leave out the `deny` routes (to show what they protect).
    no_deny: bool,
}

impl Default for WikiSetup<'_> {
    fn default() -> Self {
        WikiSetup {
            tag: "wiki",
            private_copy: false,
            follow_symlinks: true,
            local: "",
            site_extra: "",
            no_deny: false,
        }
    }
}

fn cp_a(from: &Path, to: &Path) {
    run(std::process::Command::new("cp").arg("-a").arg(from).arg(to));
}

/// The routes DokuWiki's security page asks for (nginx: `location ~
/// /(conf|bin|inc|vendor)/ { deny all; }`, `location ~ /data/ { internal;
/// }`).
const DENY: &str = "\
[[site.route]]\nprefix = \"/inc/\"\ndeny = true\n\
[[site.route]]\nprefix = \"/conf/\"\ndeny = true\n\
[[site.route]]\nprefix = \"/data/\"\ndeny = true\n\
[[site.route]]\nprefix = \"/bin/\"\ndeny = true\n\
[[site.route]]\nprefix = \"/vendor/\"\ndeny = true\n";

fn start_wiki(s: WikiSetup) -> Wiki {
    require("/usr/share/dokuwiki/doku.php", "dokuwiki");
    let dir = TempDir::new(s.tag);
    let (root, conf, data) = if s.private_copy {
        let root = dir.join("dokuwiki");
        cp_a(Path::new(DOKU), &root);
        (root.clone(), root.join("conf"), root.join("data"))
    } else {
        (PathBuf::from(DOKU), dir.join("conf"), dir.join("data"))
    };
    // Configuration: Debian's files, without its links into /var/lib.
    std::fs::create_dir_all(&conf).expect("mkdir conf");
    for e in std::fs::read_dir("/etc/dokuwiki").expect("read /etc/dokuwiki") {
        let e = e.expect("dir entry");
        let ft = e.file_type().expect("file type");
        if ft.is_file() {
            std::fs::copy(e.path(), conf.join(e.file_name())).expect("copy conf file");
        }
    }
    std::fs::write(
        conf.join("local.php"),
        format!(
            "<?php\n$conf['title'] = 'Stoa DokuWiki';\n$conf['savedir'] = '{}';\n\
             $conf['useacl'] = 1;\n$conf['superuser'] = '@admin';\n\
             $conf['authtype'] = 'authplain';\n{}\n",
            data.display(),
            s.local
        ),
    )
    .expect("write local.php");
    std::fs::write(
        conf.join("users.auth.php"),
        format!(
            "# users.auth.php written by Stoa's test\n\
             {USER}:{PASSWORD_HASH}:Stoa Tester:stoa@example.org:admin,user\n"
        ),
    )
    .expect("write users.auth.php");
    std::fs::write(
        conf.join("acl.auth.php"),
        "# acl.auth.php written by Stoa's test\n*\t@ALL\t1\n*\t@user\t16\n",
    )
    .expect("write acl.auth.php");
    // Data: Debian's initial pages and media, plus a start page.
    cp_a(Path::new("/var/lib/dokuwiki/data"), &data);
    std::fs::write(
        data.join("pages/start.txt"),
        format!("====== {START_MARKER} ======\n\nServed by Stoa.\n"),
    )
    .expect("write start.txt");
    let prepend = dir.write(
        "prepend.php",
        format!(
            "<?php\n// Stoa's test: this pool's DokuWiki reads its own conf.\n\
             if (!defined('DOKU_MAIN_CONF')) define('DOKU_MAIN_CONF', '{0}/');\n\
             if (!defined('DOKU_CONF')) define('DOKU_CONF', '{0}/');\n",
            conf.display()
        ),
    );
    let fpm = PhpFpm::start(
        &dir,
        FpmOptions {
            extra: format!(
                "php_admin_value[auto_prepend_file] = {}\n",
                prepend.display()
            ),
            ..FpmOptions::default()
        },
    );
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"{}\"\nindex = [\"doku.php\"]\nfollow_symlinks = {}\n\
             {}\n\
             [[site.route]]\nprefix = \"/\"\nphp = {{ pool = \"php\", front_controller = \"/doku.php\" }}\n\
             {}\n{}",
            root.display(),
            s.follow_symlinks,
            s.site_extra,
            if s.no_deny { "" } else { DENY },
            fpm.pool("php", 4, ""),
        ),
    );
    let server = Server::with_config(&cfg);
    Wiki {
        server,
        fpm,
        root,
        data,
        _dir: dir,
    }
}

impl Wiki {
    fn fail(&self, what: &str, r: &Response) -> String {
        format!(
            "{what}: {r:?}\nstoa stderr:\n{}\nphp-fpm:\n{}",
            self.server.stderr(),
            self.fpm.log()
        )
    }

    /// Logs in through DokuWiki's login form (with its sectok); returns
    /// the browser holding the session and auth cookies.
    fn login(&self) -> Browser {
        let mut b = Browser::new();
        let r = b.get(&self.server, "/doku.php?id=start&do=login");
        assert_eq!(r.status, 200, "{}", self.fail("login form", &r));
        let html = r.text();
        let fields = form_fields(&html, "id=\"dw__login\"");
        let sectok = field(&fields, "sectok")
            .unwrap_or_else(|| panic!("no sectok in the login form: {html}"))
            .to_owned();
        let r = b.post_form(
            &self.server,
            "/doku.php?id=start",
            &[
                ("sectok", &sectok),
                ("id", "start"),
                ("do", "login"),
                ("u", USER),
                ("p", PASSWORD),
            ],
        );
        assert!(
            r.status == 302 || r.status == 303,
            "{}",
            self.fail("login POST should redirect", &r)
        );
        let r = b.get_following(&self.server, "/doku.php?id=start");
        assert!(
            r.text().contains("Logged in as") || r.text().contains("do=logout"),
            "{}",
            self.fail("not logged in after the login POST", &r)
        );
        b
    }
}

/// Issue 9: the start page of the real DokuWiki through the `php` preset
/// (`php = { pool = "php" }`, `index = ["doku.php"]`), run by php-fpm.
#[test]
fn dokuwiki_serves_its_start_page_through_the_php_preset() {
    let w = start_wiki(WikiSetup {
        tag: "doku-start",
        ..WikiSetup::default()
    });
    // DokuWiki sends a request without a page id to its start page.
    let r = w.server.get("/");
    assert_eq!(r.status, 302, "{}", w.fail("/", &r));
    assert_eq!(r.header("location"), Some("/doku.php?id=start"));
    for path in ["/", "/doku.php", "/doku.php?id=start"] {
        let r = Browser::new().get_following(&w.server, path);
        assert_eq!(r.status, 200, "{}", w.fail(path, &r));
        let html = r.text();
        assert!(
            html.contains(&format!(">{START_MARKER}<")),
            "{}",
            w.fail("the rendered start page", &r)
        );
        assert!(
            html.contains("Stoa DokuWiki"),
            "{path}: the title of local.php"
        );
        assert!(!html.contains("<?php"), "{path}");
    }
    // Its stylesheet is produced by lib/exe/css.php.
    let r = w.server.get("/lib/exe/css.php?t=dokuwiki");
    assert_eq!(r.status, 200, "{}", w.fail("css.php", &r));
    assert!(r
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/css")));
}

/// Issue 9, Debian's layout: /usr/share/dokuwiki/lib/tpl is a symlink to
/// /var/lib/dokuwiki/lib/tpl. With `follow_symlinks = true` the template's
/// files are served; without it they are refused (403), since the link
/// leads out of the root.
#[test]
fn dokuwiki_template_assets_behind_debians_symlinks_need_follow_symlinks() {
    let asset = "/lib/tpl/dokuwiki/images/logo.png";
    let on_disk =
        std::fs::read(format!("/var/lib/dokuwiki{asset}")).expect("Debian's dokuwiki logo.png");
    assert!(
        std::fs::symlink_metadata(format!("{DOKU}/lib/tpl"))
            .expect("lib/tpl")
            .file_type()
            .is_symlink(),
        "Debian's layout links lib/tpl out of /usr/share/dokuwiki"
    );
    let w = start_wiki(WikiSetup {
        tag: "doku-follow",
        follow_symlinks: true,
        ..WikiSetup::default()
    });
    let r = w.server.get(asset);
    assert_eq!(r.status, 200, "{}", w.fail(asset, &r));
    assert_eq!(r.body, on_disk, "{asset}: the file's bytes");
    assert_eq!(r.header("content-type"), Some("image/png"));
    let r = Browser::new().get_following(&w.server, "/");
    assert_eq!(r.status, 200, "{}", w.fail("start page", &r));
    drop(w);

    let w = start_wiki(WikiSetup {
        tag: "doku-nofollow",
        follow_symlinks: false,
        ..WikiSetup::default()
    });
    let r = w.server.get(asset);
    assert_eq!(r.status, 403, "{}", w.fail(asset, &r));
    assert_ne!(r.body, on_disk);
    // doku.php itself is inside the root and still runs.
    let r = Browser::new().get_following(&w.server, "/");
    assert_eq!(r.status, 200, "{}", w.fail("start page", &r));
    assert!(r.text().contains(START_MARKER));
}

/// Issue 9: a login through DokuWiki's form (plain auth with
/// conf/users.auth.php, `useacl`), then an edit saved with the form's
/// CSRF token (`sectok`) and read back; the same save with a wrong token
/// is refused by DokuWiki and writes nothing.
#[test]
fn dokuwiki_saves_an_edit_with_its_csrf_token_and_reads_it_back() {
    let w = start_wiki(WikiSetup {
        tag: "doku-edit",
        ..WikiSetup::default()
    });
    let mut b = w.login();
    let page = "playground:stoa";
    let file = w.data.join("pages/playground/stoa.txt");
    let r = b.get(&w.server, &format!("/doku.php?id={page}&do=edit"));
    assert_eq!(r.status, 200, "{}", w.fail("edit form", &r));
    let html = r.text();
    let mut fields = form_fields(&html, "id=\"dw__editform\"");
    assert!(
        field(&fields, "sectok").is_some_and(|t| !t.is_empty()),
        "no sectok in the edit form: {html}"
    );
    let text =
        "====== Written through Stoa ======\n\nEdit marker 7f3a9c, \u{00e9}t\u{00e9} & <b>.\n";
    fields.retain(|(n, _)| n != "wikitext" && n != "do");
    fields.push(("wikitext".into(), text.into()));
    fields.push(("do[save]".into(), "Save".into()));

    // A forged request: same fields, wrong token.
    let forged: Vec<(&str, &str)> = fields
        .iter()
        .map(|(n, v)| {
            if n == "sectok" {
                (n.as_str(), "0123456789abcdef0123456789abcdef")
            } else {
                (n.as_str(), v.as_str())
            }
        })
        .collect();
    let r = b.post_form(&w.server, "/doku.php", &forged);
    assert!(r.status < 500, "{}", w.fail("forged save", &r));
    assert!(
        !file.exists(),
        "DokuWiki saved an edit with a wrong sectok: {}",
        r.text()
    );

    let good: Vec<(&str, &str)> = fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let r = b.post_form(&w.server, "/doku.php", &good);
    assert!(
        r.status == 302 || r.status == 303 || r.status == 200,
        "{}",
        w.fail("save", &r)
    );
    let saved = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}; {}", file.display(), w.fail("save", &r)));
    assert_eq!(saved, text, "the page file holds exactly the text sent");
    // Read back through Stoa, rendered, by another client (ACL: @ALL read).
    let r = Browser::new().get(&w.server, &format!("/doku.php?id={page}"));
    assert_eq!(r.status, 200, "{}", w.fail("read back", &r));
    let html = r.text();
    assert!(html.contains(">Written through Stoa<"), "{html}");
    assert!(
        html.contains("Edit marker 7f3a9c, \u{00e9}t\u{00e9} &amp; &lt;b&gt;."),
        "{html}"
    );
    // And as raw wiki text.
    let r = b.get(&w.server, &format!("/doku.php?id={page}&do=export_raw"));
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), text);
}

/// Issue 9: `userewrite = 1`, DokuWiki's pretty URLs, through
/// `[[site.rewrite]]` rules as DokuWiki's nginx page gives them
/// (`/_media/` to fetch.php, `/_detail/` to detail.php, `/_export/`, and
/// any other page path to `doku.php?id=`), with the query kept.
#[test]
fn dokuwiki_pretty_urls_work_through_rewrite_rules_with_userewrite_1() {
    let w = start_wiki(WikiSetup {
        tag: "doku-rewrite",
        local: "$conf['userewrite'] = 1;",
        site_extra: "\
[[site.rewrite]]\nfrom = \"^/_media/(.*)$\"\nto = \"/lib/exe/fetch.php?media=$1\"\n\
[[site.rewrite]]\nfrom = \"^/_detail/(.*)$\"\nto = \"/lib/exe/detail.php?media=$1\"\n\
[[site.rewrite]]\nfrom = \"^/_export/([^/]+)/(.*)$\"\nto = \"/doku.php?do=export_$1&id=$2\"\n\
[[site.rewrite]]\nfrom = \"^/([^.]*)$\"\nto = \"/doku.php?id=$1\"\n",
        ..WikiSetup::default()
    });
    let r = w.server.get("/wiki:syntax");
    assert_eq!(r.status, 200, "{}", w.fail("/wiki:syntax", &r));
    let html = r.text();
    assert!(
        html.contains("Formatting Syntax"),
        "{}",
        w.fail("syntax page", &r)
    );
    // DokuWiki believes the rewrite: its own links are pretty.
    assert!(
        html.contains("href=\"/wiki:welcome\"") || html.contains("href=\"/start\""),
        "{html}"
    );
    assert!(!html.contains("doku.php?id=wiki:welcome"), "{html}");
    // The query of the request follows the rule's.
    let r = w.server.get("/wiki:syntax?do=export_raw");
    assert_eq!(r.status, 200, "{}", w.fail("export_raw", &r));
    let raw = std::fs::read_to_string(w.data.join("pages/wiki/syntax.txt")).expect("syntax.txt");
    assert_eq!(r.text(), raw);
    let r = w.server.get("/_export/raw/start");
    assert_eq!(
        r.text(),
        format!("====== {START_MARKER} ======\n\nServed by Stoa.\n")
    );
    // Media through /_media/.
    let png = std::fs::read(w.data.join("media/wiki/dokuwiki-128.png")).expect("png");
    let r = w.server.get("/_media/wiki:dokuwiki-128.png");
    assert_eq!(r.status, 200, "{}", w.fail("/_media/", &r));
    assert_eq!(r.body, png);
    let r = w.server.get("/_detail/wiki:dokuwiki-128.png?id=start");
    assert_eq!(r.status, 200, "{}", w.fail("/_detail/", &r));
    assert!(r.text().contains("dokuwiki-128.png"));
    // Files with a dot are not rewritten: the stylesheet script still runs
    // and the code directories stay denied.
    assert_eq!(w.server.get("/lib/exe/css.php").status, 200);
    assert_eq!(w.server.get("/inc/init.php").status, 403);
}

/// Issue 9: `userewrite = 2`, page names as PATH_INFO after doku.php
/// (`/doku.php/wiki:syntax`, RFC 3875 §4.1.5), split by the `php` preset.
#[test]
fn dokuwiki_reads_the_page_from_path_info_with_userewrite_2() {
    let w = start_wiki(WikiSetup {
        tag: "doku-pathinfo",
        local: "$conf['userewrite'] = 2;",
        ..WikiSetup::default()
    });
    let r = w.server.get("/doku.php/wiki:syntax");
    assert_eq!(r.status, 200, "{}", w.fail("/doku.php/wiki:syntax", &r));
    let html = r.text();
    assert!(html.contains("Formatting Syntax"), "{html}");
    assert!(
        html.contains("href=\"/doku.php/wiki:welcome\"") || html.contains("/doku.php/start"),
        "DokuWiki's own links use PATH_INFO: {html}"
    );
    let r = w.server.get("/doku.php/start?do=export_raw");
    assert_eq!(
        r.text(),
        format!("====== {START_MARKER} ======\n\nServed by Stoa.\n"),
        "{}",
        w.fail("export_raw by PATH_INFO", &r)
    );
    // Media fetched by PATH_INFO too.
    let png = std::fs::read(w.data.join("media/wiki/dokuwiki-128.png")).expect("png");
    let r = w.server.get("/lib/exe/fetch.php/wiki:dokuwiki-128.png");
    assert_eq!(r.status, 200, "{}", w.fail("fetch.php by PATH_INFO", &r));
    assert_eq!(r.body, png);
}

/// Issue 9: an upload through the media manager's XHR endpoint
/// (`lib/exe/ajax.php?call=mediaupload`, with the session's sectok) is
/// stored and read back byte for byte through `lib/exe/fetch.php`.
#[test]
fn dokuwiki_stores_an_upload_and_serves_it_back_through_fetch_php() {
    let w = start_wiki(WikiSetup {
        tag: "doku-upload",
        ..WikiSetup::default()
    });
    let mut b = w.login();
    let r = b.get(
        &w.server,
        "/doku.php?id=playground:start&do=media&ns=playground&tab_files=upload",
    );
    assert_eq!(r.status, 200, "{}", w.fail("media manager", &r));
    let html = r.text();
    let sectok = form_fields(&html, "id=\"dw__upload\"")
        .into_iter()
        .find(|(n, _)| n == "sectok")
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no sectok in the media manager's upload form: {html}"));
    // A real PNG (DokuWiki checks image content), under a new name.
    let png = std::fs::read(w.data.join("media/wiki/dokuwiki-128.png")).expect("png");
    let path = format!(
        "/lib/exe/ajax.php?call=mediaupload&ns=playground&qqfile=stoa-upload.png&sectok={}",
        urlencode(&sectok)
    );
    let r = b.send(
        &w.server,
        "POST",
        &path,
        Some("application/octet-stream"),
        &png,
    );
    assert_eq!(r.status, 200, "{}", w.fail("mediaupload", &r));
    assert!(
        r.text().contains("\"success\":true"),
        "{}",
        w.fail("mediaupload answer", &r)
    );
    let stored = w.data.join("media/playground/stoa-upload.png");
    assert_eq!(
        std::fs::read(&stored).ok(),
        Some(png.clone()),
        "{}",
        stored.display()
    );
    let r = Browser::new().get(
        &w.server,
        "/lib/exe/fetch.php?media=playground:stoa-upload.png",
    );
    assert_eq!(r.status, 200, "{}", w.fail("fetch.php", &r));
    assert_eq!(r.header("content-type"), Some("image/png"));
    assert_eq!(r.body, png, "fetch.php gives back the uploaded bytes");
    // Without the token, DokuWiki refuses it.
    let r = b.send(
        &w.server,
        "POST",
        "/lib/exe/ajax.php?call=mediaupload&ns=playground&qqfile=forged.png",
        Some("application/octet-stream"),
        &png,
    );
    assert!(!r.text().contains("\"success\":true"), "{r:?}");
    assert!(!w.data.join("media/playground/forged.png").exists());
}

/// Issue 9 and DokuWiki's security page
/// (https://www.dokuwiki.org/security#web_access_security): `/inc/`,
/// `/conf/`, `/data/`, `/bin/` (and `/vendor/`) are refused with `deny =
/// true` (403) in the upstream layout, where they sit under the root and
/// hold password hashes and pages; without the deny routes the same
/// files would be served, which is what they guard against.
#[test]
fn dokuwiki_code_config_and_data_directories_are_denied() {
    let w = start_wiki(WikiSetup {
        tag: "doku-deny",
        private_copy: true,
        ..WikiSetup::default()
    });
    let cases = [
        "/conf/users.auth.php",
        "/conf/local.php",
        "/conf/dokuwiki.php",
        "/conf/",
        "/data/pages/start.txt",
        "/data/pages/wiki/syntax.txt",
        "/data/",
        "/inc/init.php",
        "/inc/lang/en/lang.php",
        "/inc/",
        "/bin/indexer.php",
        "/bin/",
        "/vendor/autoload.php",
        "/Conf/users.auth.php",
        "/lib/../conf/users.auth.php",
        "/data/../data/pages/start.txt",
    ];
    assert!(w.root.join("conf/users.auth.php").is_file());
    assert!(w.root.join("data/pages/start.txt").is_file());
    for path in cases {
        let r = w.server.get(path);
        let body = r.text();
        assert!(
            !body.contains(PASSWORD_HASH)
                && !body.contains(&format!("====== {START_MARKER}"))
                && !body.contains("<?php"),
            "{path}: {r:?}"
        );
        // `/Conf/` is another path (case matters in paths): not the
        // directory, so 404 or the front controller, never its files.
        if !path.starts_with("/Conf/") {
            assert_eq!(r.status, 403, "{}", w.fail(path, &r));
        }
    }
    // The wiki itself still works from the copy.
    let r = Browser::new().get_following(&w.server, "/");
    assert_eq!(r.status, 200, "{}", w.fail("/", &r));
    assert!(r.text().contains(START_MARKER));
    drop(w);

    // The control: the same layout without the deny routes gives the
    // data away (the php preset serves existing non-PHP files).
    let w = start_wiki(WikiSetup {
        tag: "doku-nodeny",
        private_copy: true,
        no_deny: true,
        ..WikiSetup::default()
    });
    let r = w.server.get("/data/pages/start.txt");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.text().contains(START_MARKER));
}

/// Issue 9: no spelling of a path, no index setting and no static prefix
/// over PHP files (`/lib/tpl/` as static, as DokuWiki's nginx page caches
/// it) serves a PHP file of the real DokuWiki as source (the class of bug
/// behind nginx/Apache PHP source disclosures; CVE-2019-11043 for `%0a`).
#[test]
fn dokuwiki_source_is_never_served_whatever_the_spelling() {
    let w = start_wiki(WikiSetup {
        tag: "doku-source",
        site_extra: "[[site.route]]\nprefix = \"/lib/tpl/\"\nstatic = {}\n",
        ..WikiSetup::default()
    });
    assert_no_source(&w.server, DOKUWIKI_SPELLINGS);
    // The static prefix still serves the template's files, and the wiki
    // still runs.
    assert_eq!(
        w.server.get("/lib/tpl/dokuwiki/images/logo.png").status,
        200
    );
    let r = Browser::new().get_following(&w.server, "/");
    assert_eq!(r.status, 200, "{}", w.fail("/", &r));
    assert!(r.text().contains(START_MARKER));
}
