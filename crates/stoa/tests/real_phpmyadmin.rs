//! Stoa in front of the real phpMyAdmin of Debian's `phpmyadmin` package,
//! configured as docs/NGINX.md writes phpMyAdmin's nginx advice: a site
//! of its own behind address rules and HTTP Basic authentication, its
//! internal directories denied. It logs in, through its own cookie form,
//! to a private MariaDB (Debian `mariadb-server`, on a Unix socket in the
//! test's directory, which the php-fpm pool makes mysqli's default
//! socket, so Debian's /etc/phpmyadmin configuration, host `localhost`,
//! is used as it is).
//!
//! Needs the Debian packages phpmyadmin, mariadb-server, php-fpm,
//! php-mysql, apache2-utils and curl (installed by test.sh).

mod common;
mod real_apps;

use common::*;
use real_apps::mariadb::MariaDb;
use real_apps::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const NEEDS: &[(&str, &str)] = &[
    ("/usr/share/phpmyadmin/index.php", "phpmyadmin"),
    ("/usr/sbin/mariadbd", "mariadb-server"),
    ("/usr/share/doc/php-fpm", "php-fpm"),
    ("/usr/share/doc/php-mysql", "php-mysql"),
    ("/usr/bin/htpasswd", "apache2-utils"),
    ("/usr/bin/curl", "curl"),
];

/// `admin:gate-pw-3390`, the Basic credentials of the site's htpasswd.
const GATE: &str = "Authorization: Basic YWRtaW46Z2F0ZS1wdy0zMzkw";
const DB_USER: &str = "stoa_pma";
const DB_PW: &str = "Stoa-pma-db-pw-6120";
const DB_NAME: &str = "stoa_pma_marker_db";

struct Pma {
    server: Server,
    fpm: PhpFpm,
    _db: MariaDb,
    php_log: PathBuf,
    _dir: TempDir,
}

fn start_pma(tag: &str) -> Option<Pma> {
    if !packages_or_skip(tag, NEEDS) {
        return None;
    }
    let dir = TempDir::new(tag);
    let db = MariaDb::start(&dir);
    db.sql(&format!(
        "CREATE DATABASE {DB_NAME}; \
         CREATE USER '{DB_USER}'@'localhost' IDENTIFIED BY '{DB_PW}'; \
         GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'localhost';"
    ));
    let users = dir.join("pma.htpasswd");
    run(Command::new("htpasswd")
        .args(["-c", "-b", "-B"])
        .arg(&users)
        .args(["admin", "gate-pw-3390"]));
    let php_log = dir.join("php-requests.log");
    let prepend = php_request_log_prepend(&dir, &php_log, "");
    let fpm = PhpFpm::start(
        &dir,
        FpmOptions {
            extra: format!(
                "php_admin_value[auto_prepend_file] = {}\n\
                 php_admin_value[mysqli.default_socket] = {}\n",
                prepend.display(),
                db.sock.display()
            ),
            ..FpmOptions::default()
        },
    );
    let text = nginx_md_config("phpmyadmin")
        .replace("/etc/stoa/pma.htpasswd", &users.display().to_string())
        .replace("/run/php/php8.2-fpm.sock", &fpm.sock.display().to_string());
    let cfg = dir.config("stoa.toml", &text);
    let server = Server::with_config(&cfg);
    Some(Pma {
        server,
        fpm,
        _db: db,
        php_log,
        _dir: dir,
    })
}

impl Pma {
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

    fn reached_php(&self) -> usize {
        php_requests(&self.php_log).len()
    }
}

/// docs/NGINX.md's phpMyAdmin site: without the Basic credentials every
/// path is 401 (RFC 7617) and PHP is not asked; with them phpMyAdmin's
/// login form comes, and its cookie login (with its CSRF token) reaches
/// MariaDB and lists the user's database; over HTTP/2 too. Its internal
/// directories are denied whatever the credentials.
#[test]
fn phpmyadmin_behind_basic_auth_logs_in_to_mariadb_through_its_form() {
    let Some(p) = start_pma("pma-login") else {
        return;
    };
    for path in ["/", "/index.php", "/libraries/classes/Config.php", "/js/"] {
        let r = patient_get(&p.server, path);
        assert_eq!(r.status, 401, "{}", p.fail(path, &r));
        assert!(
            r.header("www-authenticate")
                .is_some_and(|v| v.contains("phpMyAdmin")),
            "{:?}",
            r.headers
        );
    }
    assert_eq!(p.reached_php(), 0, "{:?}", php_requests(&p.php_log));

    let mut b = Browser::new();
    b.headers.push(GATE.to_owned());
    let r = b.get(&p.server, "/");
    assert_eq!(r.status, 200, "{}", p.fail("login page", &r));
    let html = r.text();
    let mut fields = form_fields(&html, "id=\"login_form\"");
    assert!(
        field(&fields, "token").is_some_and(|t| !t.is_empty()),
        "{}",
        p.fail("no token in the login form", &r)
    );
    fields.retain(|(n, _)| n != "pma_username" && n != "pma_password");
    fields.push(("pma_username".into(), DB_USER.into()));
    fields.push(("pma_password".into(), DB_PW.into()));
    let form: Vec<(&str, &str)> = fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let r = b.post_form(&p.server, "/index.php?route=/", &form);
    assert!(
        r.status == 302 || r.status == 303,
        "{}",
        p.fail("login POST", &r)
    );
    let r = b.get_following(&p.server, &local_path(r.header("location").unwrap_or("/")));
    assert_eq!(r.status, 200, "{}", p.fail("after login", &r));
    let r = b.get(
        &p.server,
        &format!("/index.php?route=/database/structure&db={DB_NAME}"),
    );
    assert_eq!(r.status, 200, "{}", p.fail("database page", &r));
    assert!(
        r.text().contains(DB_NAME),
        "{}",
        p.fail("the database phpMyAdmin read from MariaDB", &r)
    );
    assert!(
        !r.text().contains("id=\"login_form\""),
        "{}",
        p.fail("still the login form", &r)
    );

    let h2 = curl_h2c_get(&p.server, "/", &[GATE]);
    assert_eq!(h2.status, 200, "{h2:?}");
    assert!(h2.text().contains("login_form"), "{h2:?}");

    let before = p.reached_php();
    for path in [
        "/libraries/classes/Config.php",
        "/libraries/",
        "/templates/login/form.twig",
        "/setup/index.php",
        "/vendor/autoload.php",
    ] {
        let r = patient_request(&p.server, &request("GET", path, &[GATE]));
        assert_eq!(r.status, 403, "{}", p.fail(path, &r));
    }
    assert_eq!(p.reached_php(), before, "{:?}", php_requests(&p.php_log));
}

/// The address rules come before the password (nginx's access phase runs
/// `allow`/`deny` before `auth_basic` too): a client at 127.0.0.2, which
/// no rule allows, gets 403 even with good credentials, and is never
/// asked for them; 127.0.0.1 passes.
#[test]
fn phpmyadmin_refuses_an_address_outside_its_rules_before_asking_a_password() {
    let Some(p) = start_pma("pma-address") else {
        return;
    };
    let curl = |from: &str, auth: bool| -> u16 {
        let mut c = Command::new("curl");
        c.args(["-sS", "-o", "/dev/null", "-w", "%{http_code}"])
            .args(["--max-time", "30", "--interface", from]);
        if auth {
            c.args(["-H", GATE]);
        }
        c.arg(format!("http://{}/", p.server.addr));
        let out =
            run_with_deadline(&mut c, Duration::from_secs(40)).expect("curl took longer than 40 s");
        String::from_utf8_lossy(&out.stdout).parse().unwrap_or(0)
    };
    assert_eq!(curl("127.0.0.2", true), 403);
    assert_eq!(curl("127.0.0.2", false), 403);
    assert_eq!(p.reached_php(), 0);
    assert_eq!(curl("127.0.0.1", false), 401);
    assert_eq!(curl("127.0.0.1", true), 200, "{}", p.server.stderr());
}
