//! Issue 9: Stoa in front of the real Adminer of Debian's `adminer`
//! package, run by a php-fpm the test starts with its own pool, on a
//! SQLite database in the test's directory.
//!
//! Adminer refuses a login without a password, and SQLite has none; its
//! documented way out (https://www.adminer.org/en/password/, "use the
//! login-password-less plugin") is an `index.php` that defines
//! `adminer_object()` with that plugin and includes adminer.php, as
//! Debian's /etc/adminer/conf.php does for its plugins. The test writes
//! such an index.php in its own directory.
//!
//! Needs the Debian packages adminer, php-fpm and php-sqlite3 (installed by
//! test.sh).

mod common;
mod real_apps;

use common::*;
use real_apps::*;

const ADMINER: &str = "/usr/share/adminer/adminer.php";
const PASSWORD: &str = "stoa-adminer-pw";

struct Adminer {
    server: Server,
    fpm: PhpFpm,
    db: String,
    _dir: TempDir,
}

fn start_adminer(tag: &str) -> Adminer {
    require(ADMINER, "adminer");
    require(
        "/usr/share/adminer/plugins/login-password-less.php",
        "adminer",
    );
    let dir = TempDir::new(tag);
    dir.write(
        "www/index.php",
        format!(
            "<?php\n// Adminer with the login-password-less plugin (Stoa's test).\n\
             function adminer_object() {{\n\
             \x20   include_once '/usr/share/adminer/plugins/plugin.php';\n\
             \x20   include_once '/usr/share/adminer/plugins/login-password-less.php';\n\
             \x20   return new AdminerPlugin(array(\n\
             \x20       new AdminerLoginPasswordLess(password_hash('{PASSWORD}', PASSWORD_DEFAULT)),\n\
             \x20   ));\n\
             }}\n\
             include '{ADMINER}';\n"
        ),
    );
    dir.mkdir("db");
    // An empty file is an empty SQLite database; Adminer opens only files
    // that exist.
    let db = dir.write("db/stoa.sqlite", "").display().to_string();
    let fpm = PhpFpm::start(&dir, FpmOptions::default());
    let cfg = dir.config(
        "stoa.toml",
        &format!(
            "[[site]]\nroot = \"www\"\nindex = [\"index.php\"]\n\n\
             [[site.route]]\nsuffix = \".php\"\nfastcgi = {{ pool = \"php\", split_path = \".php\" }}\n\n\
             [[site.route]]\nprefix = \"/dist/\"\nalias = \"/usr/share/adminer\"\n\n{}",
            fpm.pool("php", 4, "")
        ),
    );
    let server = Server::with_config(&cfg);
    Adminer {
        server,
        fpm,
        db,
        _dir: dir,
    }
}

impl Adminer {
    fn fail(&self, what: &str, r: &Response) -> String {
        format!(
            "{what}: {r:?}\nstoa stderr:\n{}\nphp-fpm:\n{}",
            self.server.stderr(),
            self.fpm.log()
        )
    }

    /// `?sqlite=&username=&db=DB` and more.
    fn url(&self, rest: &str) -> String {
        format!("/?sqlite=&username=&db={}{rest}", urlencode(&self.db))
    }

    /// Logs in through Adminer's login form; returns the browser holding
    /// the session.
    fn login(&self) -> Browser {
        let mut b = Browser::new();
        let r = b.get(&self.server, "/");
        assert_eq!(r.status, 200, "{}", self.fail("login form", &r));
        let r = b.post_form(
            &self.server,
            "/",
            &[
                ("auth[driver]", "sqlite"),
                ("auth[server]", ""),
                ("auth[username]", ""),
                ("auth[password]", PASSWORD),
                ("auth[db]", &self.db),
            ],
        );
        assert_eq!(r.status, 302, "{}", self.fail("login POST", &r));
        let loc = r.header("location").map(local_path).unwrap_or_default();
        assert!(
            loc.contains("sqlite="),
            "{}",
            self.fail("login redirect", &r)
        );
        b
    }

    /// Runs `query` through Adminer's SQL command page (with its CSRF
    /// token); returns the result page.
    fn sql(&self, b: &mut Browser, query: &str) -> String {
        let r = b.get(&self.server, &self.url("&sql="));
        assert_eq!(r.status, 200, "{}", self.fail("SQL command page", &r));
        let html = r.text();
        let fields = form_fields(&html, "<form action=\"\" method=\"post\"");
        let fields = if fields.is_empty() {
            form_fields(&html, "<form action='' method='post'")
        } else {
            fields
        };
        let token = field(&fields, "token")
            .unwrap_or_else(|| panic!("no token on the SQL page: {html}"))
            .to_owned();
        let r = b.send(
            &self.server,
            "POST",
            &self.url("&sql="),
            Some("application/x-www-form-urlencoded"),
            form_urlencode(&[("query", query), ("limit", ""), ("token", &token)]).as_bytes(),
        );
        assert_eq!(r.status, 200, "{}", self.fail("SQL POST", &r));
        r.text()
    }
}

/// Issue 9: Adminer's start page (its login form) is produced by running
/// index.php through php-fpm, never served as source.
#[test]
fn adminer_shows_its_login_page() {
    let a = start_adminer("adminer-start");
    for path in ["/", "/index.php"] {
        let r = a.server.get(path);
        assert_eq!(r.status, 200, "{}", a.fail(path, &r));
        let html = r.text();
        assert!(html.contains("Login - Adminer"), "{path}: {html}");
        assert!(html.contains("auth[driver]"), "{path}: {html}");
        assert!(!html.contains("<?php"), "{path}");
    }
    // Its own static files are served by the script (`?file=`).
    let r = a.server.get("/?file=default.css&version=4.8.1");
    assert_eq!(r.status, 200, "{}", a.fail("default.css", &r));
    assert!(r.header("content-type").is_some_and(|t| t.contains("css")));
}

/// Issue 9: a login to a SQLite database through Adminer's form, a query
/// run through its SQL command page with its CSRF token, the table listed
/// on the database page and its rows shown by a select.
#[test]
fn adminer_logs_in_to_sqlite_runs_a_query_and_lists_the_table() {
    let a = start_adminer("adminer-sqlite");
    let mut b = a.login();
    let html = a.sql(
        &mut b,
        "CREATE TABLE stoa_items (id INTEGER PRIMARY KEY, name TEXT);\n\
         INSERT INTO stoa_items (name) VALUES ('written-through-stoa');\n\
         INSERT INTO stoa_items (name) VALUES ('second-row');",
    );
    assert!(
        html.contains("Query executed OK"),
        "the SQL command page: {html}"
    );
    assert!(
        std::fs::metadata(&a.db).is_ok_and(|m| m.len() > 0),
        "the database file {}",
        a.db
    );
    // The table listing of the database.
    let r = b.get(&a.server, &a.url(""));
    assert_eq!(r.status, 200, "{}", a.fail("database page", &r));
    let html = r.text();
    assert!(html.contains("stoa_items"), "{html}");
    // Its rows.
    let r = b.get(&a.server, &a.url("&select=stoa_items"));
    assert_eq!(r.status, 200, "{}", a.fail("select", &r));
    let html = r.text();
    assert!(html.contains("written-through-stoa"), "{html}");
    assert!(html.contains("second-row"), "{html}");
    // A query's result set.
    let html = a.sql(
        &mut b,
        "SELECT upper(name) AS shout FROM stoa_items ORDER BY id",
    );
    assert!(html.contains("WRITTEN-THROUGH-STOA"), "{html}");
    // Without the session, the same page asks for a login.
    let r = Browser::new().get(&a.server, &a.url("&select=stoa_items"));
    assert!(!r.text().contains("written-through-stoa"), "{r:?}");
}

/// Issue 9: no spelling of a path, no index setting and no static alias
/// over Adminer's directory serves a PHP file as source (the class of bug
/// behind nginx/Apache PHP source disclosures; CVE-2019-11043 for `%0a`).
#[test]
fn adminer_source_is_never_served_whatever_the_spelling() {
    let a = start_adminer("adminer-source");
    assert_no_source(&a.server, ADMINER_SPELLINGS);
    // The index and the script itself still run.
    for path in ["/", "/index.php", "/index.php/"] {
        let r = a.server.get(path);
        assert_eq!(r.status, 200, "{}", a.fail(path, &r));
        assert!(r.text().contains("Login - Adminer"), "{path}");
    }
}
