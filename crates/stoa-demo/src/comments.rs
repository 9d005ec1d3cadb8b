//! The comments form of Figure 1 of "Apache dynamic content technologies"
//! (a FastCGI script that takes a name and a comment from a form and
//! inserts them into a database), on SQLite.
//!
//! `GET` (or `HEAD`) shows the form and the latest comments; `POST` with a
//! form body adds one and answers `303 See Other` back to the page, so a
//! reload does not post again. Any path under the route is the page, and
//! the redirect goes to the path that was posted to.
//!
//! The database is the file named by `STOA_DEMO_COMMENTS_DB` (relative to
//! the working directory, which Stoa sets to the config file's directory),
//! created with its table on the first request.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::Connection;
use stoa_fastcgi::app::blocking::{self, Output};
use stoa_fastcgi::app::{Request, Settings};
use stoa_fastcgi::Role;

use crate::html::escape;
use crate::{form, Response};

/// The environment variable naming the database file.
pub const DB_ENV: &str = "STOA_DEMO_COMMENTS_DB";
/// Longest name, in characters; longer gets 413.
pub const MAX_NAME_CHARS: usize = 80;
/// Longest comment, in characters; longer gets 413.
pub const MAX_COMMENT_CHARS: usize = 2000;
/// Largest request body; the library answers 413 beyond it without
/// calling the handler. Room for both fields fully percent-encoded.
pub const MAX_BODY_BYTES: usize = 32 * 1024;
/// Comments shown on the page, newest first.
const SHOWN: usize = 50;

/// The request as the page sees it.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub method: &'a str,
    /// The request path (SCRIPT_NAME and PATH_INFO), decoded.
    pub path: &'a str,
    pub content_type: &'a str,
    pub body: &'a [u8],
}

/// The application: a database opened on first use and kept.
pub struct Comments {
    path: PathBuf,
    /// Used when `path` cannot be written (see [`open_writable`]).
    fallback: PathBuf,
    db: Mutex<Option<Connection>>,
}

/// Runs the application on fd 0; see the module docs.
pub fn run() -> Result<(), String> {
    let path = std::env::var_os(DB_ENV)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| format!("{DB_ENV} is not set: name the SQLite file in the pool's `env`"))?;
    let app = Comments::new(PathBuf::from(path));
    let settings = Settings {
        roles: vec![Role::Responder],
        max_stdin: MAX_BODY_BYTES,
        ..Settings::default()
    };
    blocking::run(settings, move |req: &Request, out: &mut Output| {
        app.handle(req, out)
    })
    .map_err(|e| format!("comments: {e}"))
}

impl Comments {
    /// The database at `path`, or this user's file in the temporary
    /// directory when `path` cannot be written.
    pub fn new(path: PathBuf) -> Comments {
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let fallback = std::env::temp_dir().join(format!("stoa-demo-comments-{uid}.db"));
        Comments::with_fallback(path, fallback)
    }

    pub fn with_fallback(path: PathBuf, fallback: PathBuf) -> Comments {
        Comments {
            path,
            fallback,
            db: Mutex::new(None),
        }
    }

    /// The FastCGI handler: errors go to FCGI_STDERR, which Stoa logs.
    fn handle(&self, req: &Request, out: &mut Output) -> u32 {
        use std::io::Write;
        let path = format!(
            "{}{}",
            req.param("SCRIPT_NAME").unwrap_or("/"),
            req.param("PATH_INFO").unwrap_or("")
        );
        let input = Input {
            method: req.param("REQUEST_METHOD").unwrap_or(""),
            path: &path,
            content_type: req.param("CONTENT_TYPE").unwrap_or(""),
            body: &req.stdin,
        };
        let (resp, error) = self.answer(&input);
        if let Some(e) = &error {
            let _ = out.stderr(format!("comments: {e}\n").as_bytes());
        }
        match out.write_all(&resp.to_bytes()) {
            Ok(()) if error.is_none() => 0,
            _ => 1,
        }
    }

    /// The response to `input`, and the message to log when it is a 500.
    pub fn answer(&self, input: &Input) -> (Response, Option<String>) {
        match input.method {
            "GET" | "HEAD" => match self.with_db(list) {
                Ok((total, rows)) => (Response::html(200, page(input.path, total, &rows)), None),
                Err(e) => (failure(), Some(e)),
            },
            "POST" => match submission(input) {
                Err(resp) => (resp, None),
                Ok((name, comment)) => match self.with_db(|db| add(db, &name, &comment)) {
                    Ok(()) => (
                        Response::html(303, String::new()).header("Location", location(input.path)),
                        None,
                    ),
                    Err(e) => (failure(), Some(e)),
                },
            },
            _ => (
                problem(405, "This page takes GET, HEAD and POST.")
                    .header("Allow", "GET, HEAD, POST"),
                None,
            ),
        }
    }

    /// Runs `f` on the database, opening (and creating) it first if need
    /// be. After an error the connection is dropped, so the next request
    /// opens the file again (it may have been removed or repaired).
    fn with_db<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, String> {
        // A panic elsewhere while holding the lock leaves the connection
        // usable: SQLite keeps its own consistency.
        let mut slot = self.db.lock().unwrap_or_else(PoisonError::into_inner);
        let db = match &mut *slot {
            Some(db) => db,
            empty => empty.insert(open_writable(&self.path, &self.fallback)?),
        };
        let r = f(db).map_err(|e| format!("database {}: {e}", self.path.display()));
        if r.is_err() {
            *slot = None;
        }
        r
    }
}

/// Opens the database at `path`; if that cannot be written (Stoa started
/// as root runs the pool as `nobody`, who cannot write in the demo's
/// directory), a file of this user's in the temporary directory instead,
/// said on stderr (Stoa's log), so the demo works wherever it runs.
fn open_writable(path: &std::path::Path, alt: &std::path::Path) -> Result<Connection, String> {
    let first = match open(path) {
        Ok(db) if !db.is_readonly(rusqlite::MAIN_DB).unwrap_or(true) => return Ok(db),
        Ok(_) => "read-only".to_owned(),
        Err(e) => e.to_string(),
    };
    match open(alt) {
        Ok(db) => {
            eprintln!(
                "comments: the database {} cannot be written ({first}); using {}",
                path.display(),
                alt.display()
            );
            Ok(db)
        }
        Err(e) => Err(format!(
            "cannot open the database {} ({first}) nor {} ({e})",
            path.display(),
            alt.display()
        )),
    }
}

fn open(path: &std::path::Path) -> rusqlite::Result<Connection> {
    let db = Connection::open(path)?;
    // Several processes of the pool may write at once.
    db.busy_timeout(Duration::from_secs(5))?;
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS comments (
             id INTEGER PRIMARY KEY,
             name TEXT NOT NULL,
             comment TEXT NOT NULL,
             created TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M UTC', 'now'))
         )",
    )?;
    Ok(db)
}

struct Row {
    name: String,
    comment: String,
    created: String,
}

fn list(db: &Connection) -> rusqlite::Result<(i64, Vec<Row>)> {
    let total: i64 = db.query_row("SELECT count(*) FROM comments", [], |r| r.get(0))?;
    let mut stmt =
        db.prepare("SELECT name, comment, created FROM comments ORDER BY id DESC LIMIT ?1")?;
    let rows = stmt
        .query_map([SHOWN as i64], |r| {
            Ok(Row {
                name: r.get(0)?,
                comment: r.get(1)?,
                created: r.get(2)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok((total, rows))
}

fn add(db: &Connection, name: &str, comment: &str) -> rusqlite::Result<()> {
    db.prepare("INSERT INTO comments (name, comment) VALUES (?1, ?2)")?
        .execute([name, comment])?;
    Ok(())
}

/// The name and comment of a POST, checked, or the response refusing it.
fn submission(input: &Input) -> Result<(String, String), Response> {
    if !form::is_form_type(input.content_type) {
        return Err(problem(
            415,
            "Send the form as application/x-www-form-urlencoded.",
        ));
    }
    let fields =
        form::parse(input.body).map_err(|_| problem(400, "The form was not UTF-8 text."))?;
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    };
    let name = field("name").trim().to_owned();
    // Line breaks are kept (shown as <br>), in one spelling.
    let comment = field("comment").replace("\r\n", "\n").replace('\r', "\n");
    let comment = comment.trim().to_owned();
    if name.is_empty() || comment.is_empty() {
        return Err(problem(400, "Both a name and a comment are needed."));
    }
    if name.chars().any(char::is_control)
        || comment
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(problem(400, "Control characters are not allowed."));
    }
    if name.chars().count() > MAX_NAME_CHARS || comment.chars().count() > MAX_COMMENT_CHARS {
        return Err(problem(
            413,
            &format!(
                "A name may have at most {MAX_NAME_CHARS} characters and a comment \
                 {MAX_COMMENT_CHARS}."
            ),
        ));
    }
    Ok((name, comment))
}

/// Where a POST to `path` is redirected: the same path, percent-encoded
/// (it arrives decoded), as an absolute path; never `//host` (a
/// scheme-relative reference would leave the site).
fn location(path: &str) -> String {
    let mut out = String::from("/");
    for &b in path.trim_start_matches('/').as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn page(path: &str, total: i64, rows: &[Row]) -> String {
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Comments - Stoa demo</title>\n<link rel=\"stylesheet\" href=\"/style.css\">\n\
         </head>\n<body>\n<h1>Comments</h1>\n\
         <p>A FastCGI application in Rust on Stoa's application library, storing into \
         SQLite: the form of Figure 1 of <cite>Apache dynamic content technologies</cite>. \
         <a href=\"/\">Back to the demo</a>.</p>\n\
         <form method=\"post\" action=\"{action}\">\n\
         <p><label>Name<br><input name=\"name\" maxlength=\"{MAX_NAME_CHARS}\" required></label></p>\n\
         <p><label>Comment<br><textarea name=\"comment\" rows=\"4\" cols=\"60\" \
         maxlength=\"{MAX_COMMENT_CHARS}\" required></textarea></label></p>\n\
         <p><button type=\"submit\">Leave a comment</button></p>\n</form>\n",
        action = escape(&location(path)),
    );
    html.push_str(&match total {
        0 => "<h2>No comments yet</h2>\n".to_owned(),
        1 => "<h2>1 comment</h2>\n".to_owned(),
        n if usize::try_from(n).is_ok_and(|n| n > rows.len()) => {
            format!("<h2>{n} comments (the latest {} shown)</h2>\n", rows.len())
        }
        n => format!("<h2>{n} comments</h2>\n"),
    });
    if !rows.is_empty() {
        html.push_str("<ul class=\"comments\">\n");
        for r in rows {
            html.push_str(&format!(
                "<li><p><strong>{}</strong> <small>{}</small></p>\n<p>{}</p></li>\n",
                escape(&r.name),
                escape(&r.created),
                escape(&r.comment).replace('\n', "<br>\n"),
            ));
        }
        html.push_str("</ul>\n");
    }
    html.push_str("</body>\n</html>\n");
    html
}

/// A refusal the visitor can read.
fn problem(status: u16, message: &str) -> Response {
    Response::html(
        status,
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <title>Comments - Stoa demo</title>\n<link rel=\"stylesheet\" href=\"/style.css\">\n\
             </head>\n<body>\n<h1>Not posted</h1>\n<p>{}</p>\n\
             <p><a href=\"\">Back to the form</a></p>\n</body>\n</html>\n",
            escape(message)
        ),
    )
}

/// A 500; what went wrong is logged, not shown.
fn failure() -> Response {
    problem(
        500,
        "Something went wrong on the server; it has been logged.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Db(PathBuf);

    impl Drop for Db {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn temp_db(tag: &str) -> Db {
        let p = std::env::temp_dir().join(format!("stoa-demo-{tag}-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&p);
        Db(p)
    }

    fn post(app: &Comments, body: &str) -> Response {
        app.answer(&Input {
            method: "POST",
            path: "/comments/",
            content_type: "application/x-www-form-urlencoded",
            body: body.as_bytes(),
        })
        .0
    }

    fn get(app: &Comments) -> String {
        let (r, err) = app.answer(&Input {
            method: "GET",
            path: "/comments/",
            content_type: "",
            body: b"",
        });
        assert_eq!((r.status, err), (200, None));
        String::from_utf8(r.body).expect("utf-8")
    }

    #[test]
    fn a_posted_comment_is_redirected_with_303_and_listed_escaped() {
        let db = temp_db("roundtrip");
        let app = Comments::new(db.0.clone());
        assert!(get(&app).contains("No comments yet"));
        assert!(db.0.exists(), "created on first use");
        let r = post(
            &app,
            "name=Mallory&comment=%3Cscript%3Ealert(1)%3C%2Fscript%3E%0D%0Abye",
        );
        assert_eq!(r.status, 303);
        assert_eq!(r.header_value("location"), Some("/comments/"));
        let page = get(&app);
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;/script&gt;<br>\nbye"),
            "{page}"
        );
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("<h2>1 comment</h2>"), "{page}");
    }

    #[test]
    fn empty_oversized_and_non_form_posts_are_refused() {
        let db = temp_db("refused");
        let app = Comments::new(db.0.clone());
        assert_eq!(post(&app, "name=&comment=x").status, 400);
        assert_eq!(post(&app, "name=a&comment=++").status, 400);
        assert_eq!(post(&app, "name=a&comment=%FF").status, 400);
        assert_eq!(post(&app, "name=a%07&comment=x").status, 400);
        let long = "x".repeat(MAX_COMMENT_CHARS + 1);
        assert_eq!(post(&app, &format!("name=a&comment={long}")).status, 413);
        let exact = "é".repeat(MAX_COMMENT_CHARS);
        assert_eq!(post(&app, &format!("name=a&comment={exact}")).status, 303);
        let r = app.answer(&Input {
            method: "POST",
            path: "/comments/",
            content_type: "text/plain",
            body: b"name=a&comment=b",
        });
        assert_eq!(r.0.status, 415);
        let r = app.answer(&Input {
            method: "DELETE",
            path: "/comments/",
            content_type: "",
            body: b"",
        });
        assert_eq!(
            (r.0.status, r.0.header_value("allow")),
            (405, Some("GET, HEAD, POST"))
        );
    }

    #[test]
    fn a_database_that_cannot_be_opened_is_a_500_with_a_message() {
        let app = Comments::with_fallback(
            PathBuf::from("/nonexistent/dir/comments.db"),
            PathBuf::from("/nonexistent/other/comments.db"),
        );
        let (r, err) = app.answer(&Input {
            method: "GET",
            path: "/comments/",
            content_type: "",
            body: b"",
        });
        assert_eq!(r.status, 500);
        let err = err.expect("a message to log");
        assert!(err.contains("/nonexistent/dir/comments.db"), "{err}");
        assert!(!String::from_utf8_lossy(&r.body).contains("nonexistent"));
    }

    #[test]
    fn the_redirect_is_the_posted_path_encoded_and_never_scheme_relative() {
        assert_eq!(location("/comments/"), "/comments/");
        assert_eq!(location("//evil.example/x"), "/evil.example/x");
        assert_eq!(location("/a b/ü\"<"), "/a%20b/%C3%BC%22%3C");
    }
}
