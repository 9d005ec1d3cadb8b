//! The personalized-content application of "FastCGI: A High-Performance
//! Web Server Interface" (Open Market, 1996), §5, for the lab's
//! `fastcgi-personalized` experiment.
//!
//! Each request names a user (`?user=ID&pw=PASSWORD&file=NAME`): the
//! password is checked against the user database, the user's attributes
//! are read, the content file is read and every `$NAME` in it replaced by
//! the user's attribute `NAME`, and the page returned.
//!
//! Two designs, as in the paper:
//! - `cached` (the FastCGI design): one database connection opened at
//!   start and kept; the users' records cached in memory, so with session
//!   affinity keyed on the user every request after a user's first hits
//!   the cache;
//! - `per-request` (the paper's "API" design, and CGI): a connection opened
//!   and closed for every request, no cache.
//!
//! Environment: `STOA_PERSONALIZED_DB` (SQLite file with a table
//! `users(id TEXT PRIMARY KEY, password TEXT, attrs TEXT)`, attrs as
//! `name=value;name=value`), `STOA_PERSONALIZED_CONTENT` (directory of
//! content files), `STOA_PERSONALIZED_MODE` (`cached`, the default, or
//! `per-request`).

use crate::Response;
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use stoa_fastcgi::app::blocking::{self, Output};
use stoa_fastcgi::app::{Request, Settings};
use stoa_fastcgi::Role;

/// Users kept in one process's cache at most.
const CACHE_USERS: usize = 100_000;

/// One user's record.
#[derive(Debug, Clone)]
struct User {
    password: String,
    attrs: Vec<(String, String)>,
}

/// The application's state.
pub struct Personalized {
    db_path: PathBuf,
    content: PathBuf,
    /// `cached`: the kept connection and the cache.
    kept: Option<Mutex<(Connection, HashMap<String, User>)>>,
}

fn env_path(name: &str) -> Result<PathBuf, String> {
    std::env::var_os(name)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| format!("{name} is not set"))
}

fn open(path: &Path) -> Result<Connection, String> {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| format!("{}: {e}", path.display()))
}

impl Personalized {
    /// From the environment (see the module docs); `mode` overrides
    /// `STOA_PERSONALIZED_MODE`.
    pub fn from_env(mode: Option<&str>) -> Result<Personalized, String> {
        let db_path = env_path("STOA_PERSONALIZED_DB")?;
        let content = env_path("STOA_PERSONALIZED_CONTENT")?;
        let mode = match mode {
            Some(m) => m.to_owned(),
            None => std::env::var("STOA_PERSONALIZED_MODE").unwrap_or_else(|_| "cached".into()),
        };
        let kept = match mode.as_str() {
            "cached" => Some(Mutex::new((open(&db_path)?, HashMap::new()))),
            "per-request" => None,
            other => {
                return Err(format!(
                    "STOA_PERSONALIZED_MODE={other}: cached or per-request"
                ))
            }
        };
        Ok(Personalized {
            db_path,
            content,
            kept,
        })
    }

    /// The answer to a query string.
    pub fn answer(&self, query: &str) -> Response {
        let q = crate::form::parse(query.as_bytes()).unwrap_or_default();
        let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let (Some(id), Some(pw), Some(file)) = (get("user"), get("pw"), get("file")) else {
            return Response::html(400, "give user, pw and file\n".into());
        };
        if file.contains('/') || file.starts_with('.') {
            return Response::html(400, "bad file name\n".into());
        }
        let user = match self.user(id) {
            Ok(Some(u)) => u,
            Ok(None) => return Response::html(401, "no such user\n".into()),
            Err(e) => {
                eprintln!("personalized: {e}");
                return Response::html(500, "database error\n".into());
            }
        };
        if user.password != pw {
            return Response::html(401, "wrong password\n".into());
        }
        let text = match std::fs::read_to_string(self.content.join(file)) {
            Ok(t) => t,
            Err(_) => return Response::html(404, "no such file\n".into()),
        };
        let mut page = text;
        for (name, value) in &user.attrs {
            page = page.replace(&format!("${name}"), &crate::html::escape(value));
        }
        Response::html(200, page)
    }

    fn user(&self, id: &str) -> Result<Option<User>, String> {
        match &self.kept {
            Some(kept) => {
                let mut g = kept.lock().map_err(|_| "cache lock poisoned".to_owned())?;
                if let Some(u) = g.1.get(id) {
                    return Ok(Some(u.clone()));
                }
                let u = read_user(&g.0, id)?;
                if let Some(u) = &u {
                    if g.1.len() >= CACHE_USERS {
                        g.1.clear();
                    }
                    g.1.insert(id.to_owned(), u.clone());
                }
                Ok(u)
            }
            None => {
                // The "API" design: log in to the database for this request.
                let c = open(&self.db_path)?;
                read_user(&c, id)
            }
        }
    }
}

fn read_user(c: &Connection, id: &str) -> Result<Option<User>, String> {
    let mut st = c
        .prepare("SELECT password, attrs FROM users WHERE id = ?1")
        .map_err(|e| e.to_string())?;
    let mut rows = st.query([id]).map_err(|e| e.to_string())?;
    let Some(row) = rows.next().map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let password: String = row.get(0).map_err(|e| e.to_string())?;
    let attrs: String = row.get(1).map_err(|e| e.to_string())?;
    Ok(Some(User {
        password,
        attrs: attrs
            .split(';')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    }))
}

/// Runs the application on fd 0 (FastCGI).
pub fn run() -> Result<(), String> {
    let app = Personalized::from_env(None)?;
    let settings = Settings {
        roles: vec![Role::Responder],
        ..Settings::default()
    };
    blocking::run(settings, move |req: &Request, out: &mut Output| {
        use std::io::Write;
        let resp = app.answer(req.param("QUERY_STRING").unwrap_or(""));
        u32::from(out.write_all(&resp.to_bytes()).is_err())
    })
    .map_err(|e| format!("personalized: {e}"))
}

/// Answers one request as a CGI program (RFC 3875): the query from
/// QUERY_STRING, the response on stdout. Always the per-request design (a
/// CGI process lives for one request).
pub fn cgi() -> Result<(), String> {
    let app = Personalized::from_env(Some("per-request"))?;
    let resp = app.answer(&std::env::var("QUERY_STRING").unwrap_or_default());
    use std::io::Write;
    std::io::stdout()
        .write_all(&resp.to_bytes())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(mode: &str) -> (Personalized, PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("stoa-personalized-{}-{mode}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let db = dir.join("users.db");
        let _ = std::fs::remove_file(&db);
        let c = Connection::open(&db).expect("db");
        c.execute_batch(
            "CREATE TABLE users(id TEXT PRIMARY KEY, password TEXT, attrs TEXT);
             INSERT INTO users VALUES ('u1', 'pw1', 'NAME=Ann;CITY=<Oslo>');",
        )
        .expect("schema");
        std::fs::write(dir.join("page.html"), "Hello $NAME from $CITY").expect("page");
        let app = Personalized {
            db_path: db.clone(),
            content: dir.clone(),
            kept: (mode == "cached")
                .then(|| Mutex::new((open(&db).expect("open"), HashMap::new()))),
        };
        (app, dir)
    }

    #[test]
    fn a_users_attributes_replace_the_variables_of_the_content_file_escaped() {
        for mode in ["cached", "per-request"] {
            let (app, dir) = fixture(mode);
            let r = app.answer("user=u1&pw=pw1&file=page.html");
            assert_eq!(r.status, 200, "{mode}");
            assert_eq!(r.body, b"Hello Ann from &lt;Oslo&gt;", "{mode}");
            // Twice: the cached design answers from its cache.
            assert_eq!(app.answer("user=u1&pw=pw1&file=page.html").status, 200);
            assert_eq!(app.answer("user=u1&pw=nope&file=page.html").status, 401);
            assert_eq!(app.answer("user=u9&pw=pw1&file=page.html").status, 401);
            assert_eq!(app.answer("user=u1&pw=pw1&file=../x").status, 400);
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
