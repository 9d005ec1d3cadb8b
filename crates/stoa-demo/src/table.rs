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
//! `STOA_TABLE_DB` names the SQLite file (tables `name, email, comments`,
//! made by the lab). Connections are kept: a small stack of them, one taken
//! per request (the blocking driver runs requests on their own threads),
//! opened when none is free and put back after.

use crate::{form, Response};
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;
use stoa_fastcgi::app::blocking::{self, Output};
use stoa_fastcgi::app::{Request, Settings};
use stoa_fastcgi::Role;

/// The environment variable naming the database file.
pub const DB_ENV: &str = "STOA_TABLE_DB";

/// The application: the database file and its kept connections.
pub struct Table {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

/// Runs the application on fd 0.
pub fn run() -> Result<(), String> {
    let path = std::env::var_os(DB_ENV)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| format!("{DB_ENV} is not set"))?;
    let app = Table::new(PathBuf::from(path));
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
    pub fn new(path: PathBuf) -> Table {
        Table {
            path,
            idle: Mutex::new(Vec::new()),
        }
    }

    fn with_db<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, String> {
        let taken = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let db = match taken {
            Some(db) => db,
            None => {
                let db = Connection::open(&self.path)
                    .map_err(|e| format!("{}: {e}", self.path.display()))?;
                db.busy_timeout(Duration::from_secs(5))
                    .map_err(|e| e.to_string())?;
                db
            }
        };
        let r = f(&db).map_err(|e| format!("{}: {e}", self.path.display()));
        if r.is_ok() {
            self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(db);
        }
        r
    }

    /// The response to a request.
    pub fn answer(&self, method: &str, query: &str, body: &[u8]) -> Response {
        match method {
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
                let done = self.with_db(|db| {
                    db.prepare("INSERT INTO comments VALUES (?1, ?2, ?3)")?
                        .execute([&name, &email, &comments])
                });
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
        let app = Table::new(p.clone());
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
        let _ = std::fs::remove_file(&p);
    }
}
