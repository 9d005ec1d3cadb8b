//! The lab's `dynamic-routes` application (issue 15 §2): the comments
//! program of "Apache dynamic content technologies" (§3.1: "a simple
//! Select * query [...] formatted in an HTML table", Figures 1-4: a form
//! POST inserted into the database), written here once more on Stoa's
//! application library, beside the Perl, PHP, Java and Lua versions in
//! `lab/src/dynamic/`. Every version answers byte for byte the same.
//!
//! - `GET ?t=b1|b2|b3` (any other or no `t`: the table `comments`): `SELECT
//!   * FROM` that table, as an HTML table;
//! - `POST` (form fields `name`, `email`, `comments`): one row inserted into
//!   `comments`; answers `All done OK`.
//!
//! Two databases, as every version in the lab: a request whose query has
//! `db=pg` uses PostgreSQL, any other SQLite.
//!
//! - `STOA_TABLE_DB` names the SQLite file (tables `name, email, comments`,
//!   made by the lab). Its connections are kept: a small stack of them, one
//!   taken per request (the blocking driver runs requests on their own
//!   threads), opened when none is free and put back after.
//! - `STOA_TABLE_PG` is a libpq connection string (`host=/run/postgresql
//!   dbname=comments user=lab`; no TLS). One connection per process, opened
//!   by the first request and kept (see [`pg`]).
//!
//! At least one of them must be set; a request for the other is a 500.

mod pg;

use crate::{form, Response};
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;
use stoa_fastcgi::app::blocking::{self, Output};
use stoa_fastcgi::app::{Request, Settings};
use stoa_fastcgi::Role;

/// The environment variable naming the SQLite database file.
pub const DB_ENV: &str = "STOA_TABLE_DB";

/// The environment variable holding the PostgreSQL connection string.
pub const PG_ENV: &str = "STOA_TABLE_PG";

/// The application: the SQLite file and its kept connections, and the
/// PostgreSQL connection.
pub struct Table {
    path: Option<PathBuf>,
    idle: Mutex<Vec<Connection>>,
    pg: Option<pg::Pg>,
}

/// Runs the application on fd 0.
pub fn run() -> Result<(), String> {
    let path = std::env::var_os(DB_ENV).filter(|p| !p.is_empty());
    let pg = std::env::var(PG_ENV).ok().filter(|p| !p.is_empty());
    if path.is_none() && pg.is_none() {
        return Err(format!("neither {DB_ENV} nor {PG_ENV} is set"));
    }
    let mut app = Table::new(path.map(PathBuf::from));
    if let Some(conninfo) = pg {
        app = app.with_postgres(conninfo)?;
    }
    let settings = Settings {
        roles: vec![Role::Responder],
        max_stdin: 64 * 1024,
        ..Settings::default()
    };
    blocking::run(settings, move |req: &Request, out: &mut Output| {
        use std::io::Write;
        let r = app.answer(
            req.param("REQUEST_METHOD").unwrap_or(""),
            req.param("QUERY_STRING").unwrap_or(""),
            &req.stdin,
        );
        let ok = r.status < 500;
        match out.write_all(&r.to_bytes()) {
            Ok(()) if ok => 0,
            _ => 1,
        }
    })
    .map_err(|e| format!("table: {e}"))
}

/// The table a query names: `t=b1`, `t=b2` or `t=b3`, else `comments`.
pub fn table_of(query: &str) -> &'static str {
    for pair in query.split('&') {
        match pair {
            "t=b1" => return "b1",
            "t=b2" => return "b2",
            "t=b3" => return "b3",
            _ => {}
        }
    }
    "comments"
}

/// Whether a query asks for PostgreSQL (`db=pg`).
pub fn wants_pg(query: &str) -> bool {
    query.split('&').any(|pair| pair == "db=pg")
}

/// `&`, `<`, `>` and `"` escaped.
fn esc(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}

/// The page's head and foot, as every version writes them.
pub const HEAD: &str = "<html><head><title>comments</title></head><body>\n<table>\n\
                        <tr><th>name</th><th>email</th><th>comments</th></tr>\n";
pub const FOOT: &str = "</table>\n</body></html>\n";

impl Table {
    /// The application on an SQLite file (`None`: PostgreSQL only, once
    /// [`Table::with_postgres`] adds it).
    pub fn new(path: Option<PathBuf>) -> Table {
        Table {
            path,
            idle: Mutex::new(Vec::new()),
            pg: None,
        }
    }

    /// Adds PostgreSQL (a libpq connection string), for requests with
    /// `db=pg`; connects on the first of them.
    pub fn with_postgres(mut self, conninfo: String) -> Result<Table, String> {
        self.pg = Some(pg::Pg::new(conninfo)?);
        Ok(self)
    }

    fn with_db<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, String> {
        let path = self
            .path
            .as_ref()
            .ok_or_else(|| format!("{DB_ENV} is not set"))?;
        let taken = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let db = match taken {
            Some(db) => db,
            None => {
                let db = Connection::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
                db.busy_timeout(Duration::from_secs(5))
                    .map_err(|e| e.to_string())?;
                db
            }
        };
        let r = f(&db).map_err(|e| format!("{}: {e}", path.display()));
        if r.is_ok() {
            self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(db);
        }
        r
    }

    fn pg(&self) -> Result<&pg::Pg, String> {
        self.pg
            .as_ref()
            .ok_or_else(|| format!("{PG_ENV} is not set"))
    }

    /// The response to a request.
    pub fn answer(&self, method: &str, query: &str, body: &[u8]) -> Response {
        match method {
            "GET" | "HEAD" if wants_pg(query) => {
                let page = self.pg().and_then(|pg| pg.select(table_of(query)));
                match page {
                    Ok(rows) => {
                        let mut html = String::with_capacity(256 * 1024);
                        html.push_str(HEAD);
                        for row in &rows {
                            html.push_str("<tr>");
                            for cell in row {
                                html.push_str("<td>");
                                esc(cell, &mut html);
                                html.push_str("</td>");
                            }
                            html.push_str("</tr>\n");
                        }
                        html.push_str(FOOT);
                        Response::html(200, html)
                    }
                    Err(e) => Response::html(500, format!("database error: {e}\n")),
                }
            }
            "GET" | "HEAD" => {
                let table = table_of(query);
                let page = self.with_db(|db| {
                    let mut stmt = db.prepare(&format!("SELECT * FROM {table}"))?;
                    let mut rows = stmt.query([])?;
                    let mut html = String::with_capacity(256 * 1024);
                    html.push_str(HEAD);
                    while let Some(row) = rows.next()? {
                        html.push_str("<tr>");
                        for i in 0..3 {
                            html.push_str("<td>");
                            esc(&row.get::<_, String>(i)?, &mut html);
                            html.push_str("</td>");
                        }
                        html.push_str("</tr>\n");
                    }
                    html.push_str(FOOT);
                    Ok(html)
                });
                match page {
                    Ok(html) => Response::html(200, html),
                    Err(e) => Response::html(500, format!("database error: {e}\n")),
                }
            }
            "POST" => {
                let fields = match form::parse(body) {
                    Ok(f) => f,
                    Err(_) => return Response::html(400, "not UTF-8\n".to_owned()),
                };
                let field = |n: &str| {
                    fields
                        .iter()
                        .find(|(k, _)| k == n)
                        .map_or(String::new(), |(_, v)| v.clone())
                };
                let (name, email, comments) = (field("name"), field("email"), field("comments"));
                let done = if wants_pg(query) {
                    self.pg()
                        .and_then(|pg| pg.insert([name, email, comments]))
                        .map(|_| ())
                } else {
                    self.with_db(|db| {
                        db.prepare("INSERT INTO comments VALUES (?1, ?2, ?3)")?
                            .execute([&name, &email, &comments])
                    })
                    .map(|_| ())
                };
                match done {
                    Ok(_) => Response::html(200, "All done OK\n".to_owned()),
                    Err(e) => Response::html(500, format!("database error: {e}\n")),
                }
            }
            _ => Response::html(405, "GET, HEAD or POST\n".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_star_is_an_html_table_and_a_post_is_inserted() {
        let p = std::env::temp_dir().join(format!("stoa-demo-table-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let db = Connection::open(&p).unwrap();
        db.execute_batch(
            "CREATE TABLE comments (name TEXT, email TEXT, comments TEXT);
             CREATE TABLE b1 (name TEXT, email TEXT, comments TEXT);
             INSERT INTO b1 VALUES ('a', 'a@x', 'one & <two>');",
        )
        .unwrap();
        let app = Table::new(Some(p.clone()));
        let r = app.answer("GET", "x=1&t=b1", b"");
        assert_eq!(r.status, 200);
        let want =
            format!("{HEAD}<tr><td>a</td><td>a@x</td><td>one &amp; &lt;two&gt;</td></tr>\n{FOOT}");
        assert_eq!(String::from_utf8(r.body).unwrap(), want);
        let r = app.answer("POST", "", b"name=n&email=e%40x&comments=hi+there");
        assert_eq!((r.status, r.body), (200, b"All done OK\n".to_vec()));
        let r = app.answer("GET", "", b"");
        assert!(String::from_utf8(r.body)
            .unwrap()
            .contains("<td>n</td><td>e@x</td><td>hi there</td>"));
        assert_eq!(table_of("t=b1;drop"), "comments");
        // PostgreSQL not configured: a 500 that says so, nothing stored.
        let r = app.answer("POST", "db=pg", b"name=x&email=y&comments=z");
        assert_eq!(r.status, 500);
        assert_eq!(
            r.body,
            format!("database error: {PG_ENV} is not set\n").into_bytes()
        );
        assert_eq!(app.answer("GET", "t=b1&db=pg", b"").status, 500);
        assert!(!String::from_utf8(app.answer("GET", "", b"").body)
            .unwrap()
            .contains("<td>x</td>"));
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn only_db_pg_as_a_whole_pair_selects_postgresql() {
        assert!(wants_pg("t=b1&db=pg"));
        assert!(wants_pg("db=pg"));
        assert!(!wants_pg("db=pgx&t=b1"));
        assert!(!wants_pg("xdb=pg"));
        assert!(!wants_pg(""));
    }

    #[test]
    fn a_malformed_connection_string_is_refused_at_start() {
        let e = Table::new(None)
            .with_postgres("host=/tmp port=notanumber".to_owned())
            .err()
            .expect("refused");
        assert!(e.starts_with("postgres: "), "{e}");
    }
}
