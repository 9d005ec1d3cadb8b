//! Stoa in front of the real WordPress of Debian's `wordpress` package,
//! configured as docs/NGINX.md translates WordPress's own nginx
//! configuration (the nginx.org "WordPress" recipe, which
//! developer.wordpress.org's "Nginx" page points to, and Debian's
//! /usr/share/doc/wordpress/examples/nginx-wordpress.conf): the `php`
//! route narrowed by a regex static route for assets, PHP under uploads
//! refused, `expires` on assets, `compress`, `limit_requests` on
//! wp-login.php and `basic_auth` on wp-admin.
//!
//! Each test runs its own MariaDB (Debian `mariadb-server`: `mariadbd` on
//! a Unix socket in the test's directory, no TCP, as the `mysql` user when
//! the test runs as root), its own php-fpm pool, and installs WordPress
//! by posting its install form through Stoa. Debian's wp-config.php
//! reads /etc/wordpress/config-HOST.php; so that nothing under /etc or
//! /var/lib is written and tests run in parallel, the pool's
//! `auto_prepend_file` defines `ABSPATH` as the test's copy of the tree
//! (symlinks into /usr/share/wordpress beside its own wp-config.php and
//! wp-content), which wp-load.php then uses. The same prepend file logs
//! every request that reaches PHP, which is how "without PHP" is checked.
//!
//! Needs the Debian packages wordpress, mariadb-server, php-fpm,
//! php-mysql and curl (installed by test.sh).

mod common;
mod real_apps;

use common::*;
use real_apps::mariadb::MariaDb;
use real_apps::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

const WP: &str = "/usr/share/wordpress";
const TITLE: &str = "Stoa WordPress 5c1d";
const ADMIN: &str = "stoa-admin";
const ADMIN_PW: &str = "Stoa-wp-admin-pw-9f27";

/// The Debian packages, by a file each installs.
const NEEDS: &[(&str, &str)] = &[
    ("/usr/share/wordpress/wp-load.php", "wordpress"),
    ("/usr/sbin/mariadbd", "mariadb-server"),
    ("/usr/bin/mariadb-install-db", "mariadb-server"),
    ("/usr/share/doc/php-fpm", "php-fpm"),
    ("/usr/share/doc/php-mysql", "php-mysql"),
    ("/usr/bin/curl", "curl"),
];

// ---------------------------------------------------------------------------
// WordPress behind Stoa

/// The configuration of docs/NGINX.md for WordPress that needs nothing but
/// what every Stoa has had: the `php` route (nginx `try_files $uri $uri/
/// /index.php?$args` and `location ~ \.php$`), a static route over
/// uploads (so a `.php` file there is refused, never run: static routes
/// never serve or run scripts) and wp-config.php denied. `{root}` and
/// `{pool}` are filled in by the test.
const BASE_ROUTES: &str = "\
[[site.route]]
prefix = \"/\"
php = { pool = \"php\", front_controller = \"/index.php\" }

[[site.route]]
prefix = \"/wp-content/uploads/\"
static = {}

[[site.route]]
prefix = \"/wp-config.php\"
deny = true
";

/// nginx `location ~* \.(js|css|png|jpg|jpeg|gif|ico)$ { ...
/// log_not_found off; }`: assets never reach PHP, missing or not.
const ASSET_ROUTE: &str = "\
[[site.route]]
regex = \"(?i)\\\\.(js|css|png|jpe?g|gif|ico|svg|webp|woff2?|ttf)$\"
static = {}
access_log = false
";

/// The same with the location's `expires max;`.
fn asset_route_with_expires() -> String {
    format!("{ASSET_ROUTE}expires = \"max\"\n")
}

struct WordPress {
    server: Server,
    fpm: PhpFpm,
    db: MariaDb,
    /// One line per request that reached PHP.
    php_log: PathBuf,
    dir: TempDir,
}

#[derive(Default)]
struct WpSetup<'a> {
    tag: &'a str,
    /// More keys of the `[[site]]` table.
    site: &'a str,
    /// More `[[site.route]]` tables (before the base ones).
    routes: &'a str,
    /// Leave WordPress uninstalled.
    no_install: bool,
    /// Instead of the base configuration: a whole `[[site]]` + `[[pool]]`
    /// text (docs/NGINX.md's), with `/var/www/wordpress`, the php-fpm
    /// socket and `/etc/stoa/wp-admin.htpasswd` replaced by the test's.
    config: Option<String>,
    /// An `Authorization` header line for the install request.
    install_auth: Option<&'a str>,
    /// More top-level tables (`[[cache_zone]]`), after the pool.
    top: &'a str,
}

/// The test's WordPress tree: every entry of /usr/share/wordpress linked,
/// but its own wp-config.php and wp-content (Debian's layout under
/// /var/lib/wordpress/wp-content: the packaged theme and plugin linked,
/// uploads a real directory).
fn make_tree(dir: &TempDir, db: &MariaDb) -> PathBuf {
    let root = dir.mkdir("wp");
    for e in std::fs::read_dir(WP).expect("read /usr/share/wordpress") {
        let e = e.expect("dir entry");
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name == "wp-config.php" || name == "wp-content" || name.starts_with('.') {
            continue;
        }
        std::os::unix::fs::symlink(e.path(), root.join(&*name)).expect("symlink");
    }
    dir.mkdir("wp/wp-content/uploads");
    dir.mkdir("wp/wp-content/plugins");
    dir.mkdir("wp/wp-content/themes");
    dir.symlink(
        format!("{WP}/wp-content/themes/twentytwentythree"),
        "wp/wp-content/themes/twentytwentythree",
    );
    dir.write("wp/wp-content/index.php", "<?php\n// Silence is golden.\n");
    let content = root.join("wp-content");
    dir.write(
        "wp/wp-config.php",
        format!(
            "<?php\n// wp-config.php written by Stoa's test.\n\
             define('DB_NAME', 'wordpress');\ndefine('DB_USER', 'wordpress');\n\
             define('DB_PASSWORD', 'stoa-db-pw');\ndefine('DB_HOST', 'localhost:{sock}');\n\
             define('DB_CHARSET', 'utf8mb4');\ndefine('DB_COLLATE', '');\n\
             define('AUTH_KEY', 'stoa-1');\ndefine('SECURE_AUTH_KEY', 'stoa-2');\n\
             define('LOGGED_IN_KEY', 'stoa-3');\ndefine('NONCE_KEY', 'stoa-4');\n\
             define('AUTH_SALT', 'stoa-5');\ndefine('SECURE_AUTH_SALT', 'stoa-6');\n\
             define('LOGGED_IN_SALT', 'stoa-7');\ndefine('NONCE_SALT', 'stoa-8');\n\
             $table_prefix = 'wp_';\n\
             define('WP_HOME', 'http://t');\ndefine('WP_SITEURL', 'http://t');\n\
             define('WP_CONTENT_DIR', '{content}');\n\
             // No requests leave the machine: no update checks, no cron\n\
             // spawned over HTTP.\n\
             define('WP_HTTP_BLOCK_EXTERNAL', true);\ndefine('DISABLE_WP_CRON', true);\n\
             define('AUTOMATIC_UPDATER_DISABLED', true);\ndefine('WP_DEBUG', false);\n\
             define('FS_METHOD', 'direct');\n\
             require_once ABSPATH . 'wp-settings.php';\n",
            sock = db.sock.display(),
            content = content.display(),
        ),
    );
    root
}

fn start_wordpress(s: WpSetup) -> Option<WordPress> {
    if !packages_or_skip(s.tag, NEEDS) {
        return None;
    }
    let dir = TempDir::new(s.tag);
    let db = MariaDb::start(&dir);
    db.sql(
        "CREATE DATABASE wordpress; \
         CREATE USER 'wordpress'@'localhost' IDENTIFIED BY 'stoa-db-pw'; \
         GRANT ALL ON wordpress.* TO 'wordpress'@'localhost';",
    );
    let root = make_tree(&dir, &db);
    let php_log = dir.join("php-requests.log");
    let prepend = php_request_log_prepend(
        &dir,
        &php_log,
        &format!("define('ABSPATH', '{}/');", root.display()),
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
    if s.config.is_some() {
        // The password file the guide's `basic_auth` names, read when the
        // server loads its configuration: user `editor`.
        run(Command::new("htpasswd")
            .args(["-c", "-b", "-B"])
            .arg(dir.join("wp-admin.htpasswd"))
            .args(["editor", "gate-pw-4411"]));
    }
    let text = match &s.config {
        Some(doc) => doc
            .replace("/var/www/wordpress", &root.display().to_string())
            .replace("/run/php/php8.2-fpm.sock", &fpm.sock.display().to_string())
            .replace(
                "/etc/stoa/wp-admin.htpasswd",
                &dir.join("wp-admin.htpasswd").display().to_string(),
            ),
        None => format!(
            "[[site]]\nroot = \"{root}\"\nindex = [\"index.php\"]\nfollow_symlinks = true\n{site}\n\n\
             {routes}\n{BASE_ROUTES}\n{pool}\n{top}\n",
            root = root.display(),
            site = s.site,
            routes = s.routes,
            pool = fpm.pool("php", 4, ""),
            top = s.top,
        ),
    };
    let cfg = dir.config("stoa.toml", &text);
    let server = Server::with_config(&cfg);
    let wp = WordPress {
        server,
        fpm,
        db,
        php_log,
        dir,
    };
    if !s.no_install {
        wp.install(s.install_auth);
    }
    Some(wp)
}

impl WordPress {
    fn fail(&self, what: &str, r: &Response) -> String {
        let mut body = r.text();
        body.truncate(4000);
        format!(
            "{what}: {} {:?}\n{body}\nstoa stderr:\n{}\nphp-fpm:\n{}\nmariadb:\n{}",
            r.status,
            r.headers,
            self.server.stderr(),
            self.fpm.log(),
            self.db.log()
        )
    }

    /// Posts WordPress's install form (wp-admin/install.php, step 2), as
    /// its installer page does, and checks it says so.
    fn install(&self, auth: Option<&str>) {
        let body = form_urlencode(&[
            ("weblog_title", TITLE),
            ("user_name", ADMIN),
            ("admin_password", ADMIN_PW),
            ("admin_password2", ADMIN_PW),
            ("pw_weak", "on"),
            ("admin_email", "stoa@example.org"),
            ("blog_public", "0"),
            ("Submit", "Install WordPress"),
            ("language", ""),
        ]);
        let length = format!("Content-Length: {}", body.len());
        let mut headers = vec![
            "Content-Type: application/x-www-form-urlencoded",
            length.as_str(),
        ];
        headers.extend(auth);
        let mut bytes = request("POST", "/wp-admin/install.php?step=2", &headers);
        bytes.extend_from_slice(body.as_bytes());
        let r = patient_request(&self.server, &bytes);
        assert_eq!(r.status, 200, "{}", self.fail("install.php step 2", &r));
        assert!(
            r.text().contains("Success!") || r.text().contains("WordPress has been installed"),
            "{}",
            self.fail("install.php step 2", &r)
        );
        // Pretty permalinks (Settings > Permalinks, "Post name"), which
        // need the server's `try_files` to reach index.php; WordPress
        // makes its rewrite rules again when they are missing.
        self.db.sql(
            "UPDATE wordpress.wp_options SET option_value = '/%postname%/' \
             WHERE option_name = 'permalink_structure'; \
             DELETE FROM wordpress.wp_options WHERE option_name = 'rewrite_rules';",
        );
    }

    fn php_requests(&self) -> Vec<String> {
        php_requests(&self.php_log)
    }

    /// Whether some request for `path` (with or without a query) reached
    /// PHP.
    fn reached_php(&self, path: &str) -> bool {
        self.php_requests()
            .iter()
            .any(|l| l == path || l.starts_with(&format!("{path}?")))
    }
}

fn header_req(path: &str, headers: &[&str]) -> Vec<u8> {
    request("GET", path, headers)
}

// ---------------------------------------------------------------------------
// Tests that need only what Stoa had before the edge features

/// WordPress installs through its own form behind Stoa and its front page
/// (the block theme Twenty Twenty-Three, rendered by index.php through the
/// `php` route's front controller, nginx's `try_files $uri $uri/
/// /index.php?$args`) is served over HTTP/1.1 and over HTTP/2 (h2c, RFC
/// 9113 §3.3) with the same body; a pretty permalink path that is no file
/// reaches index.php with the client's REQUEST_URI.
#[test]
fn wordpress_installs_through_its_form_and_serves_its_front_page_over_http1_and_h2() {
    let Some(wp) = start_wordpress(WpSetup {
        tag: "wp-front",
        ..WpSetup::default()
    }) else {
        return;
    };
    let r = patient_get(&wp.server, "/");
    assert_eq!(r.status, 200, "{}", wp.fail("/", &r));
    let html = r.text();
    assert!(html.contains(TITLE), "{}", wp.fail("front page title", &r));
    assert!(!html.contains("<?php"));
    // The theme's stylesheet is linked from the page and served as a file.
    assert!(
        html.contains("/wp-content/themes/twentytwentythree/"),
        "{}",
        wp.fail("theme links", &r)
    );
    let h2 = curl_h2c_get(&wp.server, "/", &[]);
    assert_eq!(h2.status, 200, "h2 front page: {h2:?}");
    assert!(h2.version.starts_with("HTTP/2"), "{h2:?}");
    assert_eq!(h2.text(), html, "the same page over HTTP/2");
    // The first post by its pretty permalink, a path that is no file:
    // index.php gets it with the client's REQUEST_URI and finds the post;
    // an unknown one is WordPress's own 404 page.
    let r = patient_get(&wp.server, "/hello-world/");
    assert_eq!(r.status, 200, "{}", wp.fail("/hello-world/", &r));
    assert!(
        r.text().contains("Welcome to WordPress"),
        "{}",
        wp.fail("/hello-world/", &r)
    );
    assert!(wp.reached_php("/hello-world/"), "{:?}", wp.php_requests());
    let r = patient_get(&wp.server, "/no-such-post/");
    assert_eq!(r.status, 404, "{}", wp.fail("/no-such-post/", &r));
    assert!(r.text().contains(TITLE), "WordPress's themed 404 page");
    // What the asset route of the other tests saves: with the `php` route
    // alone, a missing stylesheet boots WordPress for its themed 404 page
    // (nginx's `try_files ... /index.php?$args` without the asset
    // location does the same).
    let t = Instant::now();
    let r = patient_get(&wp.server, "/wp-content/themes/x/missing.css");
    let took = t.elapsed();
    assert_eq!(r.status, 404, "{}", wp.fail("missing.css", &r));
    assert!(wp.reached_php("/wp-content/themes/x/missing.css"));
    assert!(r.body.len() > 4096, "{} bytes", r.body.len());
    eprintln!(
        "missing asset through PHP (php route alone): {} bytes in {took:?}",
        r.body.len()
    );
}

/// WordPress's hardening page and the nginx recipe: a PHP file under
/// wp-content/uploads (where any author can put files) is refused (403)
/// and never run, over HTTP/1.1 and HTTP/2, whatever its spelling;
/// uploaded images there are served; wp-config.php is denied.
#[test]
fn wordpress_php_under_uploads_is_refused_and_never_run() {
    let Some(wp) = start_wordpress(WpSetup {
        tag: "wp-uploads",
        ..WpSetup::default()
    }) else {
        return;
    };
    let ran = wp.dir.join("evil-ran");
    wp.dir.write(
        "wp/wp-content/uploads/evil.php",
        format!(
            "<?php file_put_contents({:?}, 'ran'); echo 'EVIL RAN';\n",
            ran.display().to_string()
        ),
    );
    wp.dir.write(
        "wp/wp-content/uploads/2024/01/evil.php",
        "<?php echo 'EVIL RAN';\n",
    );
    let png = std::fs::read(format!(
        "{WP}/wp-content/themes/twentytwentythree/screenshot.png"
    ))
    .expect("the theme's screenshot.png");
    wp.dir.write("wp/wp-content/uploads/2024/01/pic.png", &png);
    for path in [
        "/wp-content/uploads/evil.php",
        "/wp-content/uploads/EVIL.PHP",
        "/wp-content/uploads/evil.php.",
        "/wp-content/uploads/evil.php/x",
        "/wp-content/uploads/2024/01/evil.php",
        "/wp-content/uploads/../uploads/evil.php",
        "/wp-content//uploads/evil.php",
    ] {
        let r = patient_get(&wp.server, path);
        assert!(r.status == 403 || r.status == 404, "{}", wp.fail(path, &r));
        assert!(!r.text().contains("EVIL RAN"), "{}", wp.fail(path, &r));
        assert!(!r.text().contains("<?php"), "{}", wp.fail(path, &r));
    }
    assert_eq!(
        patient_get(&wp.server, "/wp-content/uploads/evil.php").status,
        403
    );
    let h2 = curl_h2c_get(&wp.server, "/wp-content/uploads/evil.php", &[]);
    assert_eq!(h2.status, 403, "{h2:?}");
    assert!(!ran.exists(), "evil.php ran");
    assert!(
        !wp.php_requests().iter().any(|l| l.contains("evil")),
        "a request for evil.php reached PHP: {:?}",
        wp.php_requests()
    );
    let r = patient_get(&wp.server, "/wp-content/uploads/2024/01/pic.png");
    assert_eq!(r.status, 200, "{}", wp.fail("uploaded image", &r));
    assert_eq!(r.body, png);
    let r = patient_get(&wp.server, "/wp-config.php");
    assert_eq!(r.status, 403, "{}", wp.fail("/wp-config.php", &r));
    assert!(!wp.reached_php("/wp-config.php"));
}

// ---------------------------------------------------------------------------
// Tests of the edge features (regex routes, expires, compress, limits,
// basic auth, error pages)

/// nginx's `location ~* \.(js|css|png|...)$` translated to a `regex`
/// static route: a missing asset under a theme is answered 404 by Stoa,
/// small, without booting PHP (the `php` route alone would run
/// index.php for it: WordPress's 40 KB themed 404 page); over HTTP/1.1
/// and HTTP/2. Existing assets are served, and pages still reach PHP.
#[test]
fn wordpress_missing_theme_asset_is_a_small_404_without_php() {
    let Some(wp) = start_wordpress(WpSetup {
        tag: "wp-missing",
        routes: ASSET_ROUTE,
        ..WpSetup::default()
    }) else {
        return;
    };
    for path in [
        "/wp-content/themes/x/missing.css",
        "/wp-content/themes/twentytwentythree/missing.js",
        "/wp-content/plugins/gone/logo.PNG",
        "/favicon.ico",
    ] {
        let t = Instant::now();
        let r = patient_get(&wp.server, path);
        eprintln!(
            "{path}: {} bytes in {:?} (asset route)",
            r.body.len(),
            t.elapsed()
        );
        assert_eq!(r.status, 404, "{}", wp.fail(path, &r));
        assert!(
            r.body.len() < 1024,
            "{path}: a small 404, not WordPress's page: {} bytes",
            r.body.len()
        );
        let h2 = curl_h2c_get(&wp.server, path, &[]);
        assert_eq!(h2.status, 404, "{path} over h2: {h2:?}");
        assert!(
            h2.body.len() < 1024,
            "{path} over h2: {} bytes",
            h2.body.len()
        );
        assert!(
            !wp.reached_php(path),
            "{path} reached PHP: {:?}",
            wp.php_requests()
        );
    }
    let css = std::fs::read(format!(
        "{WP}/wp-content/themes/twentytwentythree/style.css"
    ))
    .expect("style.css");
    let r = wp
        .server
        .get("/wp-content/themes/twentytwentythree/style.css");
    assert_eq!(r.status, 200, "{}", wp.fail("style.css", &r));
    assert_eq!(r.body, css);
    // A page that is no file still goes to WordPress (its themed 404,
    // tens of kilobytes: what every missing asset would cost without the
    // regex route).
    let r = patient_get(&wp.server, "/no-such-page/");
    assert_eq!(r.status, 404, "{}", wp.fail("page", &r));
    assert!(r.body.len() > 4096, "{} bytes", r.body.len());
    assert!(wp.reached_php("/no-such-page/"), "{:?}", wp.php_requests());
}

/// nginx `expires max` on the asset location: the theme's CSS, JS and
/// images carry nginx's values, `Expires: Thu, 31 Dec 2037 23:55:55 GMT`
/// (RFC 9111 §5.3) and `Cache-Control: max-age=315360000` (§5.2.2.1, ten
/// years), over HTTP/1.1 and HTTP/2; pages from PHP do not get them.
#[test]
fn wordpress_static_assets_carry_expires_and_cache_control() {
    let routes = asset_route_with_expires();
    let Some(wp) = start_wordpress(WpSetup {
        tag: "wp-expires",
        routes: &routes,
        ..WpSetup::default()
    }) else {
        return;
    };
    for path in [
        "/wp-content/themes/twentytwentythree/style.css",
        "/wp-content/themes/twentytwentythree/screenshot.png",
        "/wp-includes/js/jquery/jquery.min.js",
    ] {
        let r = patient_get(&wp.server, path);
        assert_eq!(r.status, 200, "{}", wp.fail(path, &r));
        let cc = r.header("cache-control").unwrap_or_default().to_owned();
        assert!(
            cc.contains("max-age=315360000"),
            "{}",
            wp.fail(&format!("{path}: Cache-Control {cc:?}"), &r)
        );
        assert_eq!(
            r.header("expires"),
            Some("Thu, 31 Dec 2037 23:55:55 GMT"),
            "{}",
            wp.fail(path, &r)
        );
        let h2 = curl_h2c_get(&wp.server, path, &[]);
        assert_eq!(h2.status, 200);
        assert!(
            h2.header("cache-control")
                .is_some_and(|v| v.contains("max-age=315360000")),
            "{path} over h2: {:?}",
            h2.headers
        );
        assert!(h2.header("expires").is_some(), "{path} over h2");
    }
    let r = patient_get(&wp.server, "/");
    assert_eq!(r.status, 200, "{}", wp.fail("/", &r));
    assert!(
        !r.header("cache-control")
            .unwrap_or_default()
            .contains("max-age=315360000"),
        "the page is not given the assets' lifetime: {:?}",
        r.headers
    );
}

/// nginx `gzip on` (here `compress = true` on the site): WordPress's front
/// page asked with `Accept-Encoding: gzip` comes back with
/// `Content-Encoding: gzip` and `Vary: Accept-Encoding` (RFC 9110
/// §12.5.3, §12.5.5), smaller, and decodes to exactly the page sent
/// without it; over HTTP/1.1 and HTTP/2. Without `Accept-Encoding` the
/// page is sent as it is.
#[test]
fn wordpress_front_page_is_gzip_compressed_and_decodes_to_the_page() {
    let Some(wp) = start_wordpress(WpSetup {
        tag: "wp-gzip",
        site: "compress = true",
        routes: ASSET_ROUTE,
        ..WpSetup::default()
    }) else {
        return;
    };
    let plain = patient_get(&wp.server, "/");
    assert_eq!(plain.status, 200, "{}", wp.fail("/", &plain));
    assert_eq!(plain.header("content-encoding"), None);
    assert!(plain.text().contains(TITLE));
    let r = patient_request(&wp.server, &header_req("/", &["Accept-Encoding: gzip"]));
    assert_eq!(r.status, 200, "{}", wp.fail("/ gzip", &r));
    assert_eq!(
        r.header("content-encoding"),
        Some("gzip"),
        "{}",
        wp.fail("/ gzip", &r)
    );
    assert!(r.has_token("vary", "Accept-Encoding"), "{:?}", r.headers);
    assert!(
        r.body.len() * 2 < plain.body.len(),
        "compressed {} bytes, plain {}",
        r.body.len(),
        plain.body.len()
    );
    assert_eq!(
        String::from_utf8_lossy(&gunzip(&r.body)),
        plain.text(),
        "the gzip body decodes to the page"
    );
    eprintln!(
        "front page: {} bytes, {} with gzip",
        plain.body.len(),
        r.body.len()
    );
    let h2 = curl_h2c_get(&wp.server, "/", &["Accept-Encoding: gzip"]);
    assert_eq!(h2.status, 200);
    assert_eq!(
        h2.header("content-encoding"),
        Some("gzip"),
        "{:?}",
        h2.headers
    );
    assert_eq!(String::from_utf8_lossy(&gunzip(&h2.body)), plain.text());
    // The theme's stylesheet too (a static file).
    let css = std::fs::read(format!(
        "{WP}/wp-content/themes/twentytwentythree/style.css"
    ))
    .expect("style.css");
    let r = patient_request(
        &wp.server,
        &header_req(
            "/wp-content/themes/twentytwentythree/style.css",
            &["Accept-Encoding: gzip"],
        ),
    );
    assert_eq!(r.status, 200);
    if css.len() >= 256 {
        assert_eq!(
            r.header("content-encoding"),
            Some("gzip"),
            "{:?}",
            r.headers
        );
        assert_eq!(gunzip(&r.body), css);
    }
}

/// nginx `limit_req zone=login burst=...` on `location = /wp-login.php`
/// (the usual guard against password guessing), as `limit_requests` on
/// a wp-login.php route: a quick run of requests from one address gets
/// 200 for the first ones and then 429 with `Retry-After` (RFC 6585 §4),
/// and those 429s never reach PHP; the rest of the site is not limited.
#[test]
fn wordpress_login_is_rate_limited_with_429_and_retry_after() {
    let Some(wp) = start_wordpress(WpSetup {
        tag: "wp-limit",
        routes: "\
[[site.route]]
prefix = \"/wp-login.php\"
php = { pool = \"php\", front_controller = \"\" }
limit_requests = { rate = \"1/m\", burst = 2 }
",
        ..WpSetup::default()
    }) else {
        return;
    };
    let mut statuses = Vec::new();
    for _ in 0..10 {
        let r = patient_get(&wp.server, "/wp-login.php");
        if r.status == 429 {
            assert!(r.header("retry-after").is_some(), "{}", wp.fail("429", &r));
        } else {
            assert_eq!(r.status, 200, "{}", wp.fail("/wp-login.php", &r));
            assert!(
                r.text().contains("user_login"),
                "{}",
                wp.fail("login form", &r)
            );
        }
        statuses.push(r.status);
    }
    // One a minute with a burst of 2: the first three pass at once (GCRA,
    // nginx's `burst=2 nodelay`), the rest within the minute are refused.
    assert_eq!(&statuses[..3], &[200, 200, 200], "{statuses:?}");
    assert!(statuses[3..].iter().all(|&s| s == 429), "{statuses:?}");
    let ran = wp
        .php_requests()
        .iter()
        .filter(|l| l.starts_with("/wp-login.php"))
        .count();
    assert_eq!(
        ran,
        statuses.iter().filter(|&&s| s == 200).count(),
        "only the admitted requests reached PHP: {statuses:?}"
    );
    // The same client over HTTP/2 shares the limit: still refused.
    let h2 = curl_h2c_get(&wp.server, "/wp-login.php", &[]);
    assert_eq!(h2.status, 429, "{h2:?}");
    assert!(h2.header("retry-after").is_some(), "{h2:?}");
    // Other pages are not limited.
    for _ in 0..4 {
        assert_eq!(patient_get(&wp.server, "/").status, 200);
    }
}

/// nginx `auth_basic` + `auth_basic_user_file` on `location /wp-admin/`
/// (an option the WordPress hardening page gives), as `basic_auth` with
/// a file made by Apache's `htpasswd -B`: without credentials 401 with
/// `WWW-Authenticate: Basic` (RFC 7617) and PHP not run; with them
/// WordPress's admin answers (its own login redirect); the public site
/// is not asked.
#[test]
fn wordpress_admin_behind_basic_auth_asks_for_credentials_first() {
    if !packages_or_skip(
        "wordpress_admin_behind_basic_auth",
        &[("/usr/bin/htpasswd", "apache2-utils")],
    ) {
        return;
    }
    let users_dir = TempDir::new("wp-auth-users");
    let users = users_dir.join("htpasswd");
    run(Command::new("htpasswd")
        .args(["-c", "-b", "-B"])
        .arg(&users)
        .args(["editor", "gate-pw-4411"]));
    let routes = format!(
        "[[site.route]]\nprefix = \"/wp-admin/\"\nphp = {{ pool = \"php\", front_controller = \"\" }}\n\
         basic_auth = {{ realm = \"WordPress admin\", users = \"{}\" }}\n",
        users.display()
    );
    let Some(wp) = start_wordpress(WpSetup {
        tag: "wp-auth",
        routes: &routes,
        no_install: true,
        ..WpSetup::default()
    }) else {
        return;
    };
    // Installing goes through wp-admin/install.php: with credentials.
    let r = patient_get(&wp.server, "/wp-admin/");
    assert_eq!(r.status, 401, "{}", wp.fail("/wp-admin/", &r));
    assert!(
        r.header("www-authenticate")
            .is_some_and(|v| v.starts_with("Basic") && v.contains("WordPress admin")),
        "{:?}",
        r.headers
    );
    assert!(!wp.reached_php("/wp-admin/"), "{:?}", wp.php_requests());
    let bad = patient_request(
        &wp.server,
        &header_req("/wp-admin/", &["Authorization: Basic ZWRpdG9yOndyb25n"]),
    );
    assert_eq!(bad.status, 401);
    // editor:gate-pw-4411
    let good = patient_request(
        &wp.server,
        &header_req(
            "/wp-admin/install.php",
            &["Authorization: Basic ZWRpdG9yOmdhdGUtcHctNDQxMQ=="],
        ),
    );
    assert_eq!(
        good.status,
        200,
        "{}",
        wp.fail("install.php with credentials", &good)
    );
    assert!(wp.reached_php("/wp-admin/install.php"));
    // The same over HTTP/2.
    let h2 = curl_h2c_get(&wp.server, "/wp-admin/", &[]);
    assert_eq!(h2.status, 401, "{h2:?}");
    let h2 = curl_h2c_get(
        &wp.server,
        "/wp-admin/install.php",
        &["Authorization: Basic ZWRpdG9yOmdhdGUtcHctNDQxMQ=="],
    );
    assert_eq!(h2.status, 200, "{h2:?}");
}

/// docs/NGINX.md's WordPress configuration, run as written there (paths
/// replaced by the test's): WordPress installs and serves its front page
/// compressed; a missing asset is a small 404 without PHP; assets carry
/// a year's Cache-Control; PHP under uploads and wp-config.php are
/// refused; /wp-admin/ asks for the password (and admin-ajax.php does
/// not); with php-fpm stopped, the site's 50x page is served with the
/// original 502 (nginx `error_page 502 /50x.html`).
#[test]
fn wordpress_runs_with_the_configuration_of_docs_nginx_md() {
    if !packages_or_skip(
        "wordpress_runs_with_the_configuration_of_docs_nginx_md",
        &[("/usr/bin/htpasswd", "apache2-utils")],
    ) {
        return;
    }
    let Some(wp) = start_wordpress(WpSetup {
        tag: "wp-doc",
        config: Some(nginx_md_config("wordpress")),
        no_install: true,
        ..WpSetup::default()
    }) else {
        return;
    };
    // editor:gate-pw-4411, in the file start_wordpress wrote.
    let auth = "Authorization: Basic ZWRpdG9yOmdhdGUtcHctNDQxMQ==";
    wp.install(Some(auth));
    wp.dir
        .write("wp/50x.html", "<h1>Stoa test: the blog is resting</h1>\n");

    let plain = patient_get(&wp.server, "/");
    assert_eq!(plain.status, 200, "{}", wp.fail("/", &plain));
    assert!(plain.text().contains(TITLE));
    let r = patient_request(&wp.server, &header_req("/", &["Accept-Encoding: gzip"]));
    assert_eq!(
        r.header("content-encoding"),
        Some("gzip"),
        "{}",
        wp.fail("/ gzip", &r)
    );
    assert_eq!(String::from_utf8_lossy(&gunzip(&r.body)), plain.text());

    let r = patient_get(&wp.server, "/wp-content/themes/x/missing.css");
    assert_eq!(r.status, 404, "{}", wp.fail("missing.css", &r));
    assert!(r.body.len() < 1024);
    assert!(!wp.reached_php("/wp-content/themes/x/missing.css"));
    let r = wp
        .server
        .get("/wp-content/themes/twentytwentythree/style.css");
    assert_eq!(r.status, 200);
    assert!(
        r.header("cache-control")
            .is_some_and(|v| v.contains("max-age=315360000")),
        "{:?}",
        r.headers
    );

    wp.dir
        .write("wp/wp-content/uploads/evil.php", "<?php echo 'EVIL RAN';\n");
    let r = patient_get(&wp.server, "/wp-content/uploads/evil.php");
    assert_eq!(r.status, 403, "{}", wp.fail("evil.php", &r));
    assert!(!wp.reached_php("/wp-content/uploads/evil.php"));
    assert_eq!(patient_get(&wp.server, "/wp-config.php").status, 403);

    let r = patient_get(&wp.server, "/wp-admin/");
    assert_eq!(r.status, 401, "{}", wp.fail("/wp-admin/", &r));
    assert!(!wp.reached_php("/wp-admin/"));
    let r = patient_request(&wp.server, &header_req("/wp-admin/", &[auth]));
    assert_eq!(
        r.status,
        302,
        "{}",
        wp.fail("/wp-admin/ with the password", &r)
    );
    assert!(
        r.header("location")
            .is_some_and(|l| l.contains("wp-login.php")),
        "WordPress's own login comes next: {:?}",
        r.headers
    );
    let r = patient_get(&wp.server, "/wp-admin/admin-ajax.php");
    assert_ne!(r.status, 401, "{}", wp.fail("admin-ajax.php", &r));
    assert!(wp.reached_php("/wp-admin/admin-ajax.php"));

    // php-fpm stopped (dropped: stopped once, by its PID): the site's 50x
    // page, with the gateway's status, over HTTP/1.1 and HTTP/2.
    // (Bound in this order so the server stops before the database and
    // the directory go, as when the whole struct drops.)
    let WordPress {
        dir: _dir,
        db: _db,
        server,
        fpm,
        ..
    } = wp;
    drop(fpm);
    let r = patient_get(&server, "/");
    assert_eq!(r.status, 502, "without php-fpm: {r:?}\n{}", server.stderr());
    assert!(
        r.text().contains("the blog is resting"),
        "the 50x page: {r:?}"
    );
    let h2 = curl_h2c_get(&server, "/", &[]);
    assert_eq!(h2.status, 502, "{h2:?}");
    assert!(h2.text().contains("the blog is resting"), "{h2:?}");
}

// ---------------------------------------------------------------------------
// WordPress through the response cache (RFC 9111), as sites put
// nginx's fastcgi_cache or Varnish in front of it

/// The cache as docs/CONFIG.md "Caching" suggests for WordPress: the
/// site's routes cached in zone `wp` for 5 minutes (WordPress sends no
/// freshness on its pages), logged-in users, commenters and protected
/// posts bypassing it (the cookies WordPress sets for them), purge from
/// loopback.
const WP_CACHE_SITE: &str = "cache = { zone = \"wp\", default_ttl = \"5m\", \
purge = [\"127.0.0.1\", \"::1\"], \
bypass = { cookies = [\"wordpress_logged_in_*\", \"comment_author_*\", \"wp-postpass_*\"] } }";

const WP_CACHE_ZONE: &str = "[[cache_zone]]\nname = \"wp\"\nmemory = \"32M\"\n";

/// A must-use plugin that tags pages with `Surrogate-Key` (as Fastly's
/// and Varnish xkey's WordPress plugins do): `post-ID` on a post's page,
/// `home` on the front page, so that a purge by tag drops them.
const WP_KEYS_PLUGIN: &str = "<?php\n\
add_action('template_redirect', function () {\n\
    if (is_singular()) { header('Surrogate-Key: post-' . get_queried_object_id()); }\n\
    elseif (is_front_page() || is_home()) { header('Surrogate-Key: home'); }\n\
});\n";

fn cached_wordpress(tag: &str) -> Option<WordPress> {
    let wp = start_wordpress(WpSetup {
        tag,
        site: WP_CACHE_SITE,
        routes: ASSET_ROUTE,
        top: WP_CACHE_ZONE,
        ..WpSetup::default()
    })?;
    wp.dir
        .write("wp/wp-content/mu-plugins/stoa-keys.php", WP_KEYS_PLUGIN);
    // Anonymous comments appear at once (no moderation for a first
    // commenter), so the redirect after a comment is the post's URL.
    wp.db.sql(
        "UPDATE wordpress.wp_options SET option_value = '0' \
         WHERE option_name IN ('comment_previously_approved', 'comment_moderation');",
    );
    Some(wp)
}

impl WordPress {
    /// Requests for exactly `path` that reached PHP.
    fn php_hits(&self, path: &str) -> usize {
        self.php_requests().iter().filter(|l| *l == path).count()
    }

    fn cache_status(r: &Response) -> &str {
        r.header("cache-status").unwrap_or("")
    }
}

/// Anonymous readers get the front page from the cache: PHP runs once
/// for it however many read it (RFC 9111 §4, `Cache-Status` RFC 9211);
/// WordPress's tag header is not sent to them.
#[test]
fn wordpress_cached_anonymous_front_page_hits_without_php() {
    let Some(wp) = cached_wordpress("wp-cache-anon") else {
        return;
    };
    let first = patient_get(&wp.server, "/");
    assert_eq!(first.status, 200, "{}", wp.fail("/", &first));
    assert!(
        WordPress::cache_status(&first).contains("fwd=miss"),
        "{first:?}"
    );
    for _ in 0..5 {
        let r = patient_get(&wp.server, "/");
        assert_eq!(r.status, 200);
        assert!(
            WordPress::cache_status(&r).starts_with("Stoa; hit"),
            "{}",
            wp.fail("second front page", &r)
        );
        assert_eq!(r.body, first.body);
        assert_eq!(r.header("surrogate-key"), None);
    }
    assert_eq!(wp.php_hits("/"), 1, "{:?}", wp.php_requests());
}

/// A logged-in user (WordPress's `wordpress_logged_in_*` cookie) is never
/// given a cached page, and their page (with the admin bar) is never
/// stored for anonymous readers (nginx's `proxy_cache_bypass
/// $cookie_...` recipe; Varnish's WordPress VCLs do the same).
#[test]
fn wordpress_cached_logged_in_user_never_gets_a_cached_page() {
    let Some(wp) = cached_wordpress("wp-cache-login") else {
        return;
    };
    let anon = patient_get(&wp.server, "/");
    assert_eq!(anon.status, 200, "{}", wp.fail("/", &anon));
    // Log in through wp-login.php (with its test cookie, as a browser).
    let body = form_urlencode(&[
        ("log", ADMIN),
        ("pwd", ADMIN_PW),
        ("wp-submit", "Log In"),
        ("redirect_to", "http://t/"),
        ("testcookie", "1"),
    ]);
    let len = format!("Content-Length: {}", body.len());
    let mut req = request(
        "POST",
        "/wp-login.php",
        &[
            "Content-Type: application/x-www-form-urlencoded",
            "Cookie: wordpress_test_cookie=WP%20Cookie%20check",
            &len,
        ],
    );
    req.extend_from_slice(body.as_bytes());
    let login = patient_request(&wp.server, &req);
    assert_eq!(login.status, 302, "{}", wp.fail("login", &login));
    let cookies: Vec<String> = login
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
        .filter_map(|(_, v)| v.split(';').next().map(str::to_owned))
        .filter(|c| c.starts_with("wordpress_"))
        .collect();
    assert!(
        cookies
            .iter()
            .any(|c| c.starts_with("wordpress_logged_in_")),
        "{}",
        wp.fail("login cookies", &login)
    );
    let cookie = format!("Cookie: {}", cookies.join("; "));
    for _ in 0..2 {
        let before = wp.php_hits("/");
        let r = patient_request(&wp.server, &request("GET", "/", &[&cookie]));
        assert_eq!(r.status, 200, "{}", wp.fail("logged-in /", &r));
        assert_eq!(WordPress::cache_status(&r), "Stoa; fwd=bypass");
        assert!(
            r.text().contains("wpadminbar"),
            "{}",
            wp.fail("admin bar", &r)
        );
        assert_eq!(wp.php_hits("/"), before + 1);
    }
    // The login's 302 to http://t/ invalidated / (RFC 9111 §4.4: a
    // same-origin Location of a successful unsafe request), so the next
    // anonymous reader fills it again; the one after gets that copy.
    let refill = patient_get(&wp.server, "/");
    assert!(
        !refill.text().contains("wpadminbar"),
        "a logged-in page was stored"
    );
    let r = patient_get(&wp.server, "/");
    assert!(
        WordPress::cache_status(&r).starts_with("Stoa; hit"),
        "{r:?}"
    );
    assert!(
        !r.text().contains("wpadminbar"),
        "a logged-in page was stored"
    );
    assert_eq!(r.body, refill.body);
}

/// A comment POST invalidates the post's page (RFC 9111 §4.4: WordPress
/// answers 302 with the post's URL in Location, same host), so the next
/// reader sees the comment.
#[test]
fn wordpress_cached_comment_post_invalidates_the_posts_page() {
    let Some(wp) = cached_wordpress("wp-cache-comment") else {
        return;
    };
    let page = patient_get(&wp.server, "/hello-world/");
    assert_eq!(page.status, 200, "{}", wp.fail("/hello-world/", &page));
    let r = patient_get(&wp.server, "/hello-world/");
    assert!(
        WordPress::cache_status(&r).starts_with("Stoa; hit"),
        "{r:?}"
    );
    let text = "A comment through the cache 7d3a";
    let body = form_urlencode(&[
        ("comment", text),
        ("author", "Reader"),
        ("email", "reader@example.org"),
        ("url", ""),
        ("submit", "Post Comment"),
        ("comment_post_ID", "1"),
        ("comment_parent", "0"),
    ]);
    let len = format!("Content-Length: {}", body.len());
    let mut req = request(
        "POST",
        "/wp-comments-post.php",
        &["Content-Type: application/x-www-form-urlencoded", &len],
    );
    req.extend_from_slice(body.as_bytes());
    let posted = patient_request(&wp.server, &req);
    assert_eq!(posted.status, 302, "{}", wp.fail("comment", &posted));
    let loc = posted.header("location").unwrap_or_default();
    assert!(loc.starts_with("http://t/hello-world/"), "{loc}");
    let after = patient_get(&wp.server, "/hello-world/");
    assert!(
        after.text().contains(text),
        "the cached page without the comment: {}",
        wp.fail("after comment", &after)
    );
    assert_eq!(wp.php_hits("/hello-world/"), 2, "{:?}", wp.php_requests());
}

/// Purge by tag: the must-use plugin tags the post's page `post-1`;
/// `PURGE` with `Surrogate-Key: post-1` drops it (and only it), and
/// `PURGE /` by URL drops the front page.
#[test]
fn wordpress_cached_purge_by_tag_and_by_url() {
    let Some(wp) = cached_wordpress("wp-cache-purge") else {
        return;
    };
    for p in ["/", "/hello-world/", "/sample-page/"] {
        let r = patient_get(&wp.server, p);
        assert_eq!(r.status, 200, "{}", wp.fail(p, &r));
        let r = patient_get(&wp.server, p);
        assert!(
            WordPress::cache_status(&r).starts_with("Stoa; hit"),
            "{p}: {r:?}"
        );
    }
    let r = wp
        .server
        .request(&request("PURGE", "/", &["Surrogate-Key: post-1"]));
    assert_eq!(r.status, 200, "{}", wp.fail("purge by tag", &r));
    assert!(
        r.text().contains("\"purged\": 1") || r.text().contains("\"purged\":1"),
        "{r:?}"
    );
    let r = patient_get(&wp.server, "/hello-world/");
    assert!(WordPress::cache_status(&r).contains("fwd=miss"), "{r:?}");
    let r = patient_get(&wp.server, "/sample-page/");
    assert!(
        WordPress::cache_status(&r).starts_with("Stoa; hit"),
        "{r:?}"
    );
    let r = wp.server.request(&request("PURGE", "/", &[]));
    assert_eq!(r.status, 200, "{}", wp.fail("purge by URL", &r));
    let r = patient_get(&wp.server, "/");
    assert!(WordPress::cache_status(&r).contains("fwd=miss"), "{r:?}");
    assert_eq!(wp.php_hits("/"), 2);
}
