//! Stoa in front of the real MediaWiki of Debian's `mediawiki` package,
//! configured as docs/NGINX.md translates mediawiki.org's
//! "Manual:Short URL/Nginx": the wiki under `/w/`, pages at `/wiki/TITLE`
//! (a rewrite to /w/index.php; MediaWiki reads the title from
//! REQUEST_URI), only MediaWiki's entry points run, images served but
//! never run, its internal directories denied, skin and resource assets
//! with `expires`, `/` redirected to the main page and every other path
//! 404.
//!
//! Each test installs its own wiki with `maintenance/install.php
//! --dbtype sqlite` into its temporary directory (database, cache,
//! images, LocalSettings.php) and runs its own php-fpm pool, whose
//! `auto_prepend_file` defines `MW_CONFIG_FILE` as the test's
//! LocalSettings.php (MediaWiki's documented way to point at another
//! one), so nothing under /etc or /var/lib is written. The same prepend
//! file logs every request that reaches PHP.
//!
//! Needs the Debian packages mediawiki, php-fpm, php-sqlite3 and curl
//! (installed by test.sh).

mod common;
mod real_apps;

use common::*;
use real_apps::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const MW: &str = "/usr/share/mediawiki";
const WIKI: &str = "Stoa Wiki 81e0";

const NEEDS: &[(&str, &str)] = &[
    ("/usr/share/mediawiki/maintenance/install.php", "mediawiki"),
    ("/usr/bin/php", "php-cli"),
    ("/usr/share/doc/php-fpm", "php-fpm"),
    ("/usr/share/doc/php-sqlite3", "php-sqlite3"),
    ("/usr/bin/curl", "curl"),
];

/// The part of docs/NGINX.md's MediaWiki configuration that needs nothing
/// but what every Stoa has had. `{images}` is filled in by the test.
///
/// - `location /wiki/ { rewrite ^/wiki/(?<pagename>.*)$ /w/index.php; }`
/// - `location /w/ { location ~ \.php$ { try_files $uri =404; fastcgi_pass ...; } }`:
///   a `php` route over /w/ with no front controller (a missing file is
///   404, never PHP);
/// - `location /w/images { }` (a static location: a `.php` there is never
///   run) and `location /w/images/deleted { deny all; }`;
/// - `location /w/cache { deny all; }` and the other directories
///   MediaWiki ships a `Deny from all` .htaccess in.
const BASE: &str = "\
[[site.rewrite]]
from = \"^/wiki/(.*)$\"
to = \"/w/index.php\"

[[site.route]]
prefix = \"/w/\"
php = { pool = \"php\", front_controller = \"\" }

[[site.route]]
prefix = \"/w/images/\"
alias = \"{images}\"

[[site.route]]
prefix = \"/w/images/deleted/\"
deny = true

[[site.route]]
prefix = \"/w/cache/\"
deny = true

[[site.route]]
prefix = \"/w/languages/\"
deny = true

[[site.route]]
prefix = \"/w/maintenance/\"
deny = true

[[site.route]]
prefix = \"/w/includes/\"
deny = true

[[site.route]]
prefix = \"/w/vendor/\"
deny = true

[[site.route]]
prefix = \"/w/mw-config/\"
deny = true
";

/// `location ~ ^/w/resources/(assets|lib|src) { add_header Cache-Control
/// "public"; expires 7d; }` and the same for skin and extension assets.
const ASSETS: &str = "\
[[site.route]]
regex = \"^/w/resources/(assets|lib|src)/\"
static = {}
cache_control = \"public, max-age=604800\"
expires = \"7d\"

[[site.route]]
regex = \"^/w/(skins|extensions)/.+\\\\.(css|js|gif|jpg|jpeg|png|svg|wasm|ttf|woff|woff2)$\"
static = {}
expires = \"7d\"
";

/// `location = / { return 301 /wiki/Main_Page; }` and `location / {
/// return 404; }`.
const ENDS: &str = "\
[[site.route]]
regex = \"^/$\"
redirect = { to = \"/wiki/Main_Page\", status = 301 }

[[site.route]]
prefix = \"/\"
respond = { status = 404, body = \"Not found.\\n\", content_type = \"text/plain\" }
";

struct Wiki {
    server: Server,
    fpm: PhpFpm,
    php_log: PathBuf,
    images: PathBuf,
    _dir: TempDir,
}

#[derive(Default)]
struct WikiSetup<'a> {
    tag: &'a str,
    /// More keys of the `[[site]]` table.
    site: &'a str,
    /// More `[[site.route]]` tables.
    routes: &'a str,
    /// Instead of the base configuration: a whole `[[site]]` + `[[pool]]`
    /// text (docs/NGINX.md's), with `/var/www/html`, the images directory
    /// and the php-fpm socket replaced by the test's.
    config: Option<String>,
}

fn start_wiki(s: WikiSetup) -> Option<Wiki> {
    if !packages_or_skip(s.tag, NEEDS) {
        return None;
    }
    let dir = TempDir::new(s.tag);
    // The document root of the nginx page: the wiki under /w/.
    let docroot = dir.mkdir("htdocs");
    dir.symlink(MW, "htdocs/w");
    let db = dir.mkdir("db");
    let conf = dir.mkdir("conf");
    let images = dir.mkdir("images");
    let cache = dir.mkdir("cache");
    let out = run_with_deadline(
        Command::new("php")
            .arg(format!("{MW}/maintenance/install.php"))
            .args(["--dbtype", "sqlite", "--dbname", "wiki"])
            .arg("--dbpath")
            .arg(&db)
            .args(["--server", "http://t", "--scriptpath", "/w"])
            .args(["--pass", "Stoa-wiki-admin-pw-5521"])
            .arg("--confpath")
            .arg(&conf)
            .args([WIKI, "Admin"]),
        Duration::from_secs(60),
    )
    .expect("install.php took longer than 60 s");
    assert!(
        out.status.success(),
        "install.php: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let settings = conf.join("LocalSettings.php");
    let mut ls = std::fs::read_to_string(&settings).expect("LocalSettings.php");
    ls.push_str(&format!(
        "\n# Added by Stoa's test: short URLs as Manual:Short_URL/Nginx sets them.\n\
         $wgArticlePath = \"/wiki/$1\";\n$wgUsePathInfo = true;\n\
         $wgMainCacheType = CACHE_NONE;\n$wgCacheDirectory = \"{cache}\";\n\
         $wgEnableUploads = true;\n$wgUploadDirectory = \"{images}\";\n\
         $wgUploadPath = \"/w/images\";\n",
        cache = cache.display(),
        images = images.display(),
    ));
    std::fs::write(&settings, ls).expect("write LocalSettings.php");
    let php_log = dir.join("php-requests.log");
    let prepend = php_request_log_prepend(
        &dir,
        &php_log,
        &format!("define('MW_CONFIG_FILE', '{}');", settings.display()),
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
    let text = match &s.config {
        Some(doc) => doc
            .replace("/var/www/html", &docroot.display().to_string())
            .replace("/var/lib/mediawiki/images", &images.display().to_string())
            .replace("/run/php/php8.2-fpm.sock", &fpm.sock.display().to_string()),
        None => format!(
            "[[site]]\nroot = \"{root}\"\nindex = [\"index.php\"]\nfollow_symlinks = true\n{site}\n\n\
             {base}\n{routes}\n{pool}",
            root = docroot.display(),
            site = s.site,
            base = BASE.replace("{images}", &images.display().to_string()),
            routes = s.routes,
            pool = fpm.pool("php", 4, ""),
        ),
    };
    let cfg = dir.config("stoa.toml", &text);
    let server = Server::with_config(&cfg);
    Some(Wiki {
        server,
        fpm,
        php_log,
        images,
        _dir: dir,
    })
}

impl Wiki {
    fn fail(&self, what: &str, r: &Response) -> String {
        let mut body = r.text();
        body.truncate(4000);
        format!(
            "{what}: {} {:?}\n{body}\nstoa stderr:\n{}\nphp-fpm:\n{}",
            r.status,
            r.headers,
            self.server.stderr(),
            self.fpm.log()
        )
    }

    fn reached_php(&self, path: &str) -> bool {
        php_requests(&self.php_log)
            .iter()
            .any(|l| l == path || l.starts_with(&format!("{path}?")))
    }
}

// ---------------------------------------------------------------------------
// Tests that need only what Stoa had before the edge features

/// Manual:Short_URL/Nginx: `/wiki/Main_Page` is rewritten to
/// /w/index.php, which reads the title from the client's REQUEST_URI and
/// renders the page, over HTTP/1.1 and HTTP/2 (h2c); MediaWiki's own links
/// are short URLs; `/wiki/Special:Version` and a page title with a query
/// (`?action=raw`) work too; the long form still works.
#[test]
fn mediawiki_short_urls_serve_pages_through_index_php_over_http1_and_h2() {
    let Some(w) = start_wiki(WikiSetup {
        tag: "mw-short",
        ..WikiSetup::default()
    }) else {
        return;
    };
    let r = patient_get(&w.server, "/wiki/Main_Page");
    assert_eq!(r.status, 200, "{}", w.fail("/wiki/Main_Page", &r));
    let html = r.text();
    assert!(html.contains(WIKI), "{}", w.fail("site name", &r));
    assert!(
        html.contains("MediaWiki has been installed"),
        "{}",
        w.fail("main page text", &r)
    );
    assert!(
        html.contains("href=\"/wiki/Special:RecentChanges\"")
            || html.contains("href=\"/wiki/Special:Random\""),
        "MediaWiki's own links are short URLs: {}",
        w.fail("links", &r)
    );
    assert!(w.reached_php("/wiki/Main_Page"));
    let h2 = curl_h2c_get(&w.server, "/wiki/Main_Page", &[]);
    assert_eq!(h2.status, 200, "h2: {h2:?}");
    assert!(h2.version.starts_with("HTTP/2"), "{h2:?}");
    assert!(h2.text().contains("MediaWiki has been installed"));
    let r = patient_get(&w.server, "/wiki/Special:Version");
    assert_eq!(r.status, 200, "{}", w.fail("Special:Version", &r));
    assert!(
        r.text().contains("1.39"),
        "{}",
        w.fail("Special:Version", &r)
    );
    let r = patient_get(&w.server, "/wiki/Main_Page?action=raw");
    assert_eq!(r.status, 200, "{}", w.fail("action=raw", &r));
    assert!(
        r.text().starts_with("<strong>MediaWiki has been installed"),
        "{}",
        w.fail("action=raw", &r)
    );
    let r = patient_get(&w.server, "/w/index.php?title=Main_Page&action=raw");
    assert_eq!(r.status, 200, "{}", w.fail("long form", &r));
    // A page that does not exist is MediaWiki's own 404.
    let r = patient_get(&w.server, "/wiki/No_such_page_here");
    assert_eq!(r.status, 404, "{}", w.fail("missing page", &r));
    assert!(r.text().contains("There is currently no text in this page"));
    // The API, an entry point with a query.
    let r = w
        .server
        .get("/w/api.php?action=query&meta=siteinfo&format=json");
    assert_eq!(r.status, 200, "{}", w.fail("api.php", &r));
    assert!(r.text().contains(WIKI), "{}", w.fail("api.php", &r));
}

/// Manual:Short_URL/Nginx and Manual:Security: a PHP file under the
/// images directory is refused (403), never run; uploaded files are
/// served; the deleted-images directory and MediaWiki's internal
/// directories (`maintenance`, `includes`, `cache`, `mw-config`...) are
/// denied, over HTTP/1.1 and HTTP/2; none of it reaches PHP.
#[test]
fn mediawiki_images_are_never_run_and_internal_directories_are_denied() {
    let Some(w) = start_wiki(WikiSetup {
        tag: "mw-deny",
        ..WikiSetup::default()
    }) else {
        return;
    };
    std::fs::write(w.images.join("evil.php"), "<?php echo 'EVIL RAN';\n").expect("evil.php");
    std::fs::create_dir_all(w.images.join("deleted/a")).expect("mkdir deleted");
    std::fs::write(w.images.join("deleted/a/secret.png"), b"secret").expect("secret.png");
    let png = std::fs::read(format!("{MW}/resources/assets/wiki.png")).expect("wiki.png");
    std::fs::create_dir_all(w.images.join("a/ab")).expect("mkdir a/ab");
    std::fs::write(w.images.join("a/ab/Pic.png"), &png).expect("Pic.png");
    for path in [
        "/w/images/evil.php",
        "/w/images/EVIL.PHP",
        "/w/images/evil.php/x",
        "/w/images/deleted/a/secret.png",
        "/w/maintenance/install.php",
        "/w/maintenance/",
        "/w/includes/WebStart.php",
        "/w/cache/",
        "/w/languages/Language.php",
        "/w/mw-config/index.php",
        "/w/vendor/autoload.php",
    ] {
        let r = patient_get(&w.server, path);
        // A path below a file is no file at all: 404 is as good.
        if path.ends_with("/x") {
            assert_eq!(r.status, 404, "{}", w.fail(path, &r));
        } else {
            assert_eq!(r.status, 403, "{}", w.fail(path, &r));
        }
        assert!(!r.text().contains("EVIL RAN") && !r.text().contains("<?php"));
        assert!(!w.reached_php(path), "{path} reached PHP");
    }
    let h2 = curl_h2c_get(&w.server, "/w/images/evil.php", &[]);
    assert_eq!(h2.status, 403, "{h2:?}");
    let r = patient_get(&w.server, "/w/images/a/ab/Pic.png");
    assert_eq!(r.status, 200, "{}", w.fail("image", &r));
    assert_eq!(r.body, png);
    // A missing file under /w/ is a 404 from Stoa, not PHP.
    let r = patient_get(&w.server, "/w/skins/Vector/missing.css");
    assert_eq!(r.status, 404, "{}", w.fail("missing skin file", &r));
    assert!(!w.reached_php("/w/skins/Vector/missing.css"));
}

// ---------------------------------------------------------------------------
// Tests of the edge features (regex routes, expires, redirect, respond,
// compress)

/// `location ~ ^/w/(skins|extensions)/.+\.(css|js|...)$ { expires 7d; }`
/// and `location ~ ^/w/resources/(assets|lib|src) { add_header
/// Cache-Control "public"; expires 7d; }`: skin and resource files carry
/// a week's `Cache-Control: max-age=604800` and `Expires` (RFC 9111
/// §5.2.2.1, §5.3), over HTTP/1.1 and HTTP/2; MediaWiki's pages do not.
#[test]
fn mediawiki_skin_and_resource_assets_carry_a_weeks_expires() {
    let Some(w) = start_wiki(WikiSetup {
        tag: "mw-expires",
        routes: ASSETS,
        ..WikiSetup::default()
    }) else {
        return;
    };
    for path in [
        "/w/resources/assets/wiki.png",
        "/w/resources/assets/change-your-logo.svg",
        "/w/skins/Vector/skinStyles/jquery.ui/jquery.ui.tooltip.css",
    ] {
        let r = patient_get(&w.server, path);
        assert_eq!(r.status, 200, "{}", w.fail(path, &r));
        assert!(
            r.header("cache-control")
                .is_some_and(|v| v.contains("max-age=604800")),
            "{}",
            w.fail(path, &r)
        );
        assert!(r.header("expires").is_some(), "{}", w.fail(path, &r));
        let h2 = curl_h2c_get(&w.server, path, &[]);
        assert_eq!(h2.status, 200);
        assert!(
            h2.header("cache-control")
                .is_some_and(|v| v.contains("max-age=604800")),
            "{path} over h2: {:?}",
            h2.headers
        );
    }
    let r = patient_get(&w.server, "/wiki/Main_Page");
    assert_eq!(r.status, 200, "{}", w.fail("/wiki/Main_Page", &r));
    assert!(
        !r.header("cache-control")
            .unwrap_or_default()
            .contains("max-age=604800"),
        "{:?}",
        r.headers
    );
}

/// `location = / { return 301 /wiki/Main_Page; }` and `location / {
/// return 404; }` as `redirect` and `respond` routes: `/` is a 301 to the
/// main page (RFC 9110 §15.4.2), any path outside the wiki is a small
/// 404 from Stoa that never reaches PHP, and the wiki still works.
#[test]
fn mediawiki_root_redirects_to_the_main_page_and_other_paths_are_404() {
    let Some(w) = start_wiki(WikiSetup {
        tag: "mw-redirect",
        routes: ENDS,
        ..WikiSetup::default()
    }) else {
        return;
    };
    let r = patient_get(&w.server, "/");
    assert_eq!(r.status, 301, "{}", w.fail("/", &r));
    assert_eq!(
        r.header("location").map(local_path).as_deref(),
        Some("/wiki/Main_Page"),
        "{:?}",
        r.headers
    );
    let h2 = curl_h2c_get(&w.server, "/", &[]);
    assert_eq!(h2.status, 301, "{h2:?}");
    for path in ["/index.php", "/wp-login.php", "/robots.txt.bak", "/x/y"] {
        let r = patient_get(&w.server, path);
        assert_eq!(r.status, 404, "{}", w.fail(path, &r));
        assert!(r.body.len() < 256, "{path}: {} bytes", r.body.len());
        assert!(!w.reached_php(path));
    }
    let r = Browser::new().get_following(&w.server, "/");
    assert_eq!(r.status, 200, "{}", w.fail("/ followed", &r));
    assert!(r.text().contains("MediaWiki has been installed"));
}

/// `gzip on` as `compress = true`: a wiki page from PHP and a
/// ResourceLoader answer (load.php, JavaScript made by PHP) come back
/// with `Content-Encoding: gzip` when asked and decode to the
/// uncompressed answer, over HTTP/1.1 and HTTP/2.
#[test]
fn mediawiki_pages_and_load_php_are_gzip_compressed_and_decode_to_the_same() {
    let Some(w) = start_wiki(WikiSetup {
        tag: "mw-gzip",
        site: "compress = true",
        ..WikiSetup::default()
    }) else {
        return;
    };
    for path in [
        "/wiki/Main_Page?action=raw",
        "/w/load.php?modules=startup&only=scripts&raw=1&skin=vector",
    ] {
        let plain = patient_get(&w.server, path);
        assert_eq!(plain.status, 200, "{}", w.fail(path, &plain));
        assert_eq!(plain.header("content-encoding"), None);
        let r = patient_request(&w.server, &request("GET", path, &["Accept-Encoding: gzip"]));
        assert_eq!(r.status, 200, "{}", w.fail(path, &r));
        assert_eq!(
            r.header("content-encoding"),
            Some("gzip"),
            "{}",
            w.fail(path, &r)
        );
        assert!(r.has_token("vary", "Accept-Encoding"), "{:?}", r.headers);
        assert_eq!(gunzip(&r.body), plain.body, "{path}: decodes to the same");
        let h2 = curl_h2c_get(&w.server, path, &["Accept-Encoding: gzip"]);
        assert_eq!(
            h2.header("content-encoding"),
            Some("gzip"),
            "{:?}",
            h2.headers
        );
        assert_eq!(gunzip(&h2.body), plain.body, "{path} over h2");
    }
}

/// docs/NGINX.md's MediaWiki configuration (Manual:Short_URL/Nginx's
/// current form), run as written there: short URLs, `/` redirected to
/// the main page, rest.php with PATH_INFO, images served and never run,
/// skin assets with a week's lifetime, pages compressed, and every path
/// that is no entry point or asset a small 404 that never reaches PHP.
#[test]
fn mediawiki_runs_with_the_configuration_of_docs_nginx_md() {
    let Some(w) = start_wiki(WikiSetup {
        tag: "mw-doc",
        config: Some(nginx_md_config("mediawiki")),
        ..WikiSetup::default()
    }) else {
        return;
    };
    let r = patient_get(&w.server, "/wiki/Main_Page");
    assert_eq!(r.status, 200, "{}", w.fail("/wiki/Main_Page", &r));
    assert!(r.text().contains("MediaWiki has been installed"));
    let raw = patient_get(&w.server, "/wiki/Main_Page?action=raw");
    assert_eq!(raw.status, 200, "{}", w.fail("action=raw", &raw));
    let r = patient_request(
        &w.server,
        &request(
            "GET",
            "/wiki/Main_Page?action=raw",
            &["Accept-Encoding: gzip"],
        ),
    );
    assert_eq!(
        r.header("content-encoding"),
        Some("gzip"),
        "{}",
        w.fail("gzip", &r)
    );
    assert_eq!(gunzip(&r.body), raw.body);
    let r = patient_get(&w.server, "/");
    assert_eq!(r.status, 301, "{}", w.fail("/", &r));
    assert_eq!(
        r.header("location").map(local_path).as_deref(),
        Some("/wiki/Main_Page")
    );
    let r = patient_get(&w.server, "/w/rest.php/v1/page/Main_Page");
    assert_eq!(r.status, 200, "{}", w.fail("rest.php", &r));
    assert!(
        r.text().contains("\"key\":\"Main_Page\""),
        "{}",
        w.fail("rest.php", &r)
    );
    std::fs::write(w.images.join("evil.php"), "<?php echo 'EVIL RAN';\n").expect("evil.php");
    let r = patient_get(&w.server, "/w/images/evil.php");
    assert_eq!(r.status, 403, "{}", w.fail("evil.php", &r));
    let r = w
        .server
        .get("/w/skins/Vector/skinStyles/jquery.ui/jquery.ui.tooltip.css");
    assert_eq!(r.status, 200, "{}", w.fail("skin css", &r));
    assert!(
        r.header("cache-control")
            .is_some_and(|v| v.contains("max-age=604800")),
        "{:?}",
        r.headers
    );
    for path in [
        "/w/maintenance/install.php",
        "/w/includes/WebStart.php",
        "/w/LocalSettings.php",
        "/w/images/evil.php/x",
        "/index.php",
        "/w/skins/Vector/missing.css",
    ] {
        let r = patient_get(&w.server, path);
        assert!(r.status == 404 || r.status == 403, "{}", w.fail(path, &r));
        assert!(r.body.len() < 1024, "{path}: {} bytes", r.body.len());
        assert!(!w.reached_php(path), "{path} reached PHP");
    }
}
