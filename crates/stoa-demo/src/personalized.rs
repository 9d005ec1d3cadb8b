//! The personalized-content application of "FastCGI: A High-Performance
//! Web Server Interface" (Open Market, 1996), §5, for the lab's
//! `fastcgi-personalized` experiment.
//!
//! Each request names a user (`?user=ID&pw=PASSWORD&file=NAME`): the
//! password is checked against the user database, the user's attributes
//! are read, the content file is read and every `$NAME` in it replaced by
//! the user's attribute `NAME`, and the page returned.
//!
//! Three designs, as the paper ran them (§5.2, §5.4):
//! - `cached` (the FastCGI design): one database connection opened at
//!   start and kept; a cache of recently used users' records in memory,
//!   bounded, the least recently used record discarded to make room (§3:
//!   "If the cache is full, the application discards some old information
//!   before adding the new"). With session affinity keyed on the user,
//!   every request of a user after its first hits its process's cache;
//!   routed at random, a user's requests spread over every process's
//!   cache, and a cache sized for the users routed to its process holds
//!   too few of them;
//! - `uncached` (§5.4's "FastCGI with cache disabled"): the kept
//!   connection, no cache: every request reads the user's record on it;
//! - `per-request` (the paper's "API" design, and CGI): a connection opened
//!   and closed for every request, no cache.
//!
//! Environment: `STOA_PERSONALIZED_DB` (SQLite file with a table
//! `users(id TEXT PRIMARY KEY, password TEXT, attrs TEXT)`, attrs as
//! `name=value;name=value`), `STOA_PERSONALIZED_CONTENT` (directory of
//! content files), `STOA_PERSONALIZED_MODE` (`cached`, the default,
//! `uncached` or `per-request`), `STOA_PERSONALIZED_CACHE` (users one
//! process's cache holds, default 100000), `STOA_PERSONALIZED_STATS` (a
//! directory: each process keeps its counters in `personalized-PID.txt`
//! there, as `lookups=N hits=N evictions=N`, rewritten every 256 lookups,
//! so a reader sees them to within 255 lookups a process).

use crate::Response;
use rusqlite::{Connection, OpenFlags};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use stoa_fastcgi::app::blocking::{self, Output};
use stoa_fastcgi::app::{Request, Settings};
use stoa_fastcgi::Role;

/// Users kept in one process's cache at most, unless
/// `STOA_PERSONALIZED_CACHE` says otherwise.
const CACHE_USERS: usize = 100_000;

/// The counters are written out every this many lookups.
const STATS_EVERY: u64 = 256;

/// One user's record.
#[derive(Debug, Clone)]
struct User {
    password: String,
    attrs: Vec<(String, String)>,
}

/// How the application reaches its users' records (the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A kept connection and a bounded cache of users.
    Cached,
    /// A kept connection, no cache.
    Uncached,
    /// A connection per request, no cache.
    PerRequest,
}

impl Mode {
    /// `STOA_PERSONALIZED_MODE`'s value.
    pub fn parse(s: &str) -> Result<Mode, String> {
        match s {
            "cached" => Ok(Mode::Cached),
            "uncached" => Ok(Mode::Uncached),
            "per-request" => Ok(Mode::PerRequest),
            other => Err(format!(
                "STOA_PERSONALIZED_MODE={other}: cached, uncached or per-request"
            )),
        }
    }
}

/// A cache of users bounded to `cap` records, the least recently used
/// discarded first.
#[derive(Debug)]
struct Lru {
    cap: usize,
    /// The last use's stamp, increasing.
    tick: u64,
    map: HashMap<String, (User, u64)>,
    /// The records by last use, oldest first.
    order: BTreeMap<u64, String>,
}

impl Lru {
    fn new(cap: usize) -> Lru {
        Lru {
            cap,
            tick: 0,
            map: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    /// The record of `id`, now the most recently used.
    fn get(&mut self, id: &str) -> Option<User> {
        let (user, stamp) = self.map.get_mut(id)?;
        let key = self.order.remove(stamp)?;
        self.tick += 1;
        *stamp = self.tick;
        self.order.insert(self.tick, key);
        Some(user.clone())
    }

    /// Keeps `user` as `id`'s record; returns whether an older record was
    /// discarded to make room.
    fn put(&mut self, id: &str, user: User) -> bool {
        if self.cap == 0 {
            return false;
        }
        let mut evicted = false;
        if self.map.len() >= self.cap && !self.map.contains_key(id) {
            if let Some((_, old)) = self.order.pop_first() {
                self.map.remove(&old);
                evicted = true;
            }
        }
        self.tick += 1;
        if let Some((_, stamp)) = self.map.insert(id.to_owned(), (user, self.tick)) {
            self.order.remove(&stamp);
        }
        self.order.insert(self.tick, id.to_owned());
        evicted
    }
}

/// How often the users' records were looked up, found in the cache, and
/// discarded from it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub lookups: u64,
    pub hits: u64,
    pub evictions: u64,
}

/// The application's state.
pub struct Personalized {
    db_path: PathBuf,
    content: PathBuf,
    mode: Mode,
    /// `cached` and `uncached`: the kept connection (and the cache, which
    /// `uncached` never fills).
    kept: Option<Mutex<(Connection, Lru)>>,
    stats: Mutex<Stats>,
    /// Where the counters go (`STOA_PERSONALIZED_STATS`).
    stats_file: Option<PathBuf>,
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
    pub fn from_env(mode: Option<Mode>) -> Result<Personalized, String> {
        let db_path = env_path("STOA_PERSONALIZED_DB")?;
        let content = env_path("STOA_PERSONALIZED_CONTENT")?;
        let mode = match mode {
            Some(m) => m,
            None => Mode::parse(
                &std::env::var("STOA_PERSONALIZED_MODE").unwrap_or_else(|_| "cached".into()),
            )?,
        };
        let cap = match std::env::var("STOA_PERSONALIZED_CACHE") {
            Ok(v) if !v.is_empty() => v.parse::<usize>().map_err(|_| {
                format!("STOA_PERSONALIZED_CACHE={v}: a number of users (0 or more)")
            })?,
            _ => CACHE_USERS,
        };
        let stats_file = std::env::var_os("STOA_PERSONALIZED_STATS")
            .filter(|p| !p.is_empty())
            .map(|d| PathBuf::from(d).join(format!("personalized-{}.txt", std::process::id())));
        Personalized::new(db_path, content, mode, cap, stats_file)
    }

    fn new(
        db_path: PathBuf,
        content: PathBuf,
        mode: Mode,
        cap: usize,
        stats_file: Option<PathBuf>,
    ) -> Result<Personalized, String> {
        let kept = match mode {
            Mode::Cached => Some(Mutex::new((open(&db_path)?, Lru::new(cap)))),
            Mode::Uncached => Some(Mutex::new((open(&db_path)?, Lru::new(0)))),
            Mode::PerRequest => None,
        };
        Ok(Personalized {
            db_path,
            content,
            mode,
            kept,
            stats: Mutex::new(Stats::default()),
            stats_file,
        })
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
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
        let (found, hit, evicted) = match &self.kept {
            Some(kept) => {
                let mut g = kept.lock().map_err(|_| "cache lock poisoned".to_owned())?;
                let (conn, cache) = &mut *g;
                match cache.get(id) {
                    Some(u) => (Some(u), true, false),
                    None => {
                        let u = read_user(conn, id)?;
                        let evicted = match (&u, self.mode) {
                            (Some(u), Mode::Cached) => cache.put(id, u.clone()),
                            _ => false,
                        };
                        (u, false, evicted)
                    }
                }
            }
            None => {
                // The "API" design: log in to the database for this request.
                let c = open(&self.db_path)?;
                (read_user(&c, id)?, false, false)
            }
        };
        self.count(hit, evicted);
        Ok(found)
    }

    fn count(&self, hit: bool, evicted: bool) {
        let Ok(mut s) = self.stats.lock() else {
            return;
        };
        s.lookups += 1;
        s.hits += u64::from(hit);
        s.evictions += u64::from(evicted);
        if s.lookups % STATS_EVERY == 0 {
            if let Some(f) = &self.stats_file {
                let line = format!(
                    "lookups={} hits={} evictions={}\n",
                    s.lookups, s.hits, s.evictions
                );
                // Counters are a measurement aid: a failed write is said,
                // never a failed request.
                if let Err(e) = std::fs::write(f, line) {
                    eprintln!("personalized: {}: {e}", f.display());
                }
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
    let app = Personalized::from_env(Some(Mode::PerRequest))?;
    let resp = app.answer(&std::env::var("QUERY_STRING").unwrap_or_default());
    use std::io::Write;
    std::io::stdout()
        .write_all(&resp.to_bytes())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An application over a fresh database of users `u1`..`uN` (password
    /// `pwK`) and a content file `page.html`.
    fn fixture(mode: Mode, cap: usize, users: usize) -> (Personalized, PathBuf) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "stoa-personalized-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        let db = dir.join("users.db");
        let _ = std::fs::remove_file(&db);
        let c = Connection::open(&db).expect("db");
        c.execute_batch(
            "CREATE TABLE users(id TEXT PRIMARY KEY, password TEXT, attrs TEXT);
             INSERT INTO users VALUES ('u1', 'pw1', 'NAME=Ann;CITY=<Oslo>');",
        )
        .expect("schema");
        for k in 2..=users {
            c.execute(
                "INSERT INTO users VALUES (?1, ?2, 'NAME=Bob;CITY=Rome')",
                [format!("u{k}"), format!("pw{k}")],
            )
            .expect("user");
        }
        std::fs::write(dir.join("page.html"), "Hello $NAME from $CITY").expect("page");
        let app = Personalized::new(db, dir.clone(), mode, cap, None).expect("app");
        (app, dir)
    }

    fn ask(app: &Personalized, k: usize) -> u16 {
        app.answer(&format!("user=u{k}&pw=pw{k}&file=page.html"))
            .status
    }

    #[test]
    fn a_users_attributes_replace_the_variables_of_the_content_file_escaped() {
        for mode in [Mode::Cached, Mode::Uncached, Mode::PerRequest] {
            let (app, dir) = fixture(mode, 10, 1);
            let r = app.answer("user=u1&pw=pw1&file=page.html");
            assert_eq!(r.status, 200, "{mode:?}");
            assert_eq!(r.body, b"Hello Ann from &lt;Oslo&gt;", "{mode:?}");
            // Twice: the cached design answers from its cache.
            assert_eq!(app.answer("user=u1&pw=pw1&file=page.html").status, 200);
            assert_eq!(app.answer("user=u1&pw=nope&file=page.html").status, 401);
            assert_eq!(app.answer("user=u9&pw=pw1&file=page.html").status, 401);
            assert_eq!(app.answer("user=u1&pw=pw1&file=../x").status, 400);
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// §5.2: "all a user's requests after the first hit in the
    /// application's cache"; §5.4's "cache disabled" reads every time.
    #[test]
    fn the_cached_design_reads_a_user_once_and_the_uncached_design_every_time() {
        for (mode, hits) in [
            (Mode::Cached, 9),
            (Mode::Uncached, 0),
            (Mode::PerRequest, 0),
        ] {
            let (app, dir) = fixture(mode, 10, 1);
            for _ in 0..10 {
                assert_eq!(ask(&app, 1), 200, "{mode:?}");
            }
            let s = app.stats();
            assert_eq!((s.lookups, s.hits, s.evictions), (10, hits, 0), "{mode:?}");
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// §3: "If the cache is full, the application discards some old
    /// information before adding the new": the least recently used.
    #[test]
    fn a_full_cache_discards_the_least_recently_used_user() {
        let (app, dir) = fixture(Mode::Cached, 2, 3);
        assert_eq!(ask(&app, 1), 200);
        assert_eq!(ask(&app, 2), 200);
        assert_eq!(ask(&app, 1), 200); // u1 used after u2: u2 is the oldest
        assert_eq!(ask(&app, 3), 200); // discards u2
        assert_eq!(app.stats().evictions, 1);
        let hits = app.stats().hits;
        assert_eq!(ask(&app, 1), 200);
        assert_eq!(app.stats().hits, hits + 1, "u1 was kept");
        assert_eq!(ask(&app, 2), 200);
        assert_eq!(app.stats().hits, hits + 1, "u2 was discarded");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The affinity argument of §3 and §5.2: users visited in turn, more
    /// of them than one cache holds, miss on every request (a cache of
    /// recently used records cycled through), while half of them, the
    /// share affinity routes to one of two processes, hit after their
    /// first request.
    #[test]
    fn a_bounded_cache_holds_the_users_routed_to_it_but_not_all_of_them() {
        let (app, dir) = fixture(Mode::Cached, 6, 10);
        for _ in 0..5 {
            for k in 1..=10 {
                assert_eq!(ask(&app, k), 200);
            }
        }
        assert_eq!(app.stats().hits, 0, "10 users through a cache of 6");
        let (app, dir2) = fixture(Mode::Cached, 6, 10);
        for _ in 0..5 {
            for k in 1..=5 {
                assert_eq!(ask(&app, k), 200);
            }
        }
        assert_eq!(app.stats().hits, 20, "5 users through a cache of 6");
        let _ = std::fs::remove_dir_all(dir);
        let _ = std::fs::remove_dir_all(dir2);
    }

    #[test]
    fn the_counters_are_written_to_the_stats_file_every_256_lookups() {
        let (mut app, dir) = fixture(Mode::Cached, 10, 1);
        let file = dir.join("stats.txt");
        app.stats_file = Some(file.clone());
        for _ in 0..255 {
            assert_eq!(ask(&app, 1), 200);
        }
        assert!(!file.exists());
        assert_eq!(ask(&app, 1), 200);
        let text = std::fs::read_to_string(&file).expect("stats");
        assert_eq!(text, "lookups=256 hits=255 evictions=0\n");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_modes_are_named_as_the_environment_gives_them() {
        assert_eq!(Mode::parse("cached"), Ok(Mode::Cached));
        assert_eq!(Mode::parse("uncached"), Ok(Mode::Uncached));
        assert_eq!(Mode::parse("per-request"), Ok(Mode::PerRequest));
        assert!(Mode::parse("off").is_err());
    }
}
