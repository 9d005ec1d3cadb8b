//! The static file handler: path mapping confined to the root, a per-worker
//! cache of small files, conditional requests, ranges, precompressed
//! variants and directory listings.
//!
//! It runs synchronously on the worker thread: files are expected in the page
//! cache, and a blocking stat or read of a cached file costs less than a hop
//! to a thread pool (nginx and lighttpd make the same trade).

use crate::exchange::Exchange;
use crate::filter::FileVersion;
use crate::fs::Root;
use crate::http::{autoindex, conditional, path, range};
use bytes::Bytes;
use rustc_hash::FxHashMap;
use std::cell::{Cell, OnceCell};
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant, UNIX_EPOCH};
use stoa_h1::{Method, RequestHead};

/// Methods a static route answers, for `Allow`.
const ALLOW: &[u8] = b"GET, HEAD, OPTIONS";

/// A static route's configuration, opened at load time.
#[derive(Debug)]
pub struct StaticConfig {
    /// The root directory, opened for `openat2(RESOLVE_BENEATH)`.
    pub root: Root,
    /// `root.path_str`, for building cache keys.
    root_str: String,
    pub index: Vec<String>,
    pub autoindex: bool,
    /// Open symlinks that lead out of the root (default: refused).
    follow_symlinks: bool,
    /// Lowercase name endings of files a script route runs: never served
    /// as files, whatever route, alias or index leads here.
    scripts: Vec<String>,
    /// For an `alias` route: the prefix removed from the path before it is
    /// mapped under the root.
    strip: Option<String>,
}

impl StaticConfig {
    pub fn open(root: &Path, index: Vec<String>, autoindex: bool) -> Result<StaticConfig, String> {
        let root = Root::open(root)?;
        let root_str = root.path_str.clone();
        Ok(StaticConfig {
            root,
            root_str,
            index,
            autoindex,
            follow_symlinks: false,
            scripts: Vec::new(),
            strip: None,
        })
    }

    /// The site's rules: symlinks, names never served, an alias prefix.
    pub fn with_rules(
        mut self,
        follow_symlinks: bool,
        scripts: Vec<String>,
        strip: Option<String>,
    ) -> StaticConfig {
        self.follow_symlinks = follow_symlinks;
        self.scripts = scripts;
        self.strip = strip;
        self
    }

    /// Whether the site has scripts this handler refuses to serve (and
    /// whose index names routing may run instead).
    pub fn has_scripts(&self) -> bool {
        !self.scripts.is_empty()
    }

    /// For a directory path, the first index name present there when it is
    /// a script of the site (routing runs it instead of serving it).
    pub fn script_index(&self, norm: &str) -> Option<&str> {
        if self.scripts.is_empty() || !norm.ends_with('/') {
            return None;
        }
        let rel = match &self.strip {
            Some(p) => norm.strip_prefix(p.as_str()).unwrap_or("/"),
            None => norm,
        };
        let dir = format!("{}{rel}", self.root_str);
        let name = self
            .index
            .iter()
            .find(|n| std::fs::metadata(format!("{dir}{n}")).is_ok_and(|m| m.is_file()))?;
        self.is_script(name).then_some(name.as_str())
    }

    /// Whether the last segment of `path` names a script of the site
    /// ([`StaticConfig::is_script`]); no search for the segment on a site
    /// without scripts.
    fn is_script_path(&self, path: &str) -> bool {
        if self.scripts.is_empty() {
            return false;
        }
        self.is_script(file_name(path))
    }

    /// Whether a file of this name is a script of the site (case and
    /// trailing dots or spaces ignored: `X.PHP`, `x.php.`).
    pub fn is_script(&self, name: &str) -> bool {
        if self.scripts.is_empty() {
            return false;
        }
        let name = name.trim_end_matches(['.', ' ']);
        self.scripts
            .iter()
            .any(|s| crate::http::path::ends_with_ignore_case(name, s))
    }
}

/// What the cache knows of one file.
struct Entry {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    /// Seconds since the epoch, for Last-Modified and conditionals.
    modified: u64,
    etag: Box<[u8]>,
    content_type: &'static str,
    /// The extension named no type: `content_type` is the fallback, which
    /// a route's `default_type` replaces.
    untyped: bool,
    /// `Content-Type`, `Accept-Ranges`, `Last-Modified`, `ETag` and, for
    /// compressible types, `Vary`: encoded once per file, not per request.
    headers: Bytes,
    /// `headers` HPACK-encoded, made at the first HTTP/2 response and
    /// reused by every later one (the encoding keeps no state between
    /// header blocks).
    h2_headers: OnceCell<Rc<[u8]>>,
    /// Where `Last-Modified` starts in `headers`: from there on are the
    /// fields a 304 carries (RFC 9110 §15.4.5).
    validators_at: usize,
    compressible: bool,
    /// The whole file, when small enough to keep.
    body: Option<Bytes>,
    /// For a file too large to keep: its open descriptor, so that serving
    /// it again within `revalidate` costs no openat2/statx/close (the 1 MiB
    /// row of issue 16: lighttpd and nginx keep descriptors open too).
    /// Checked like `body` (same_file against a fresh stat), and closed
    /// when the entry goes (eviction, replacement, reload) and the last
    /// response sending from it ends.
    file: Option<Rc<File>>,
    /// When a stat last confirmed this entry.
    checked: Cell<Instant>,
}

impl Entry {
    fn same_file(&self, m: &Metadata) -> bool {
        self.ino == m.ino()
            && self.dev == m.dev()
            && self.size == m.size()
            && self.mtime == (m.mtime(), m.mtime_nsec())
    }
}

/// Per-worker cache of file metadata and small file contents. Each entry is
/// checked against a fresh `stat` on use, so a change of size, mtime or
/// inode (a replaced file) is seen at once.
pub struct FileCache {
    map: FxHashMap<Box<str>, Rc<Entry>>,
    bytes: u64,
    max_bytes: u64,
    max_file_bytes: u64,
    /// Entries holding an open descriptor, at most `MAX_OPEN_FILES`.
    open_files: usize,
    /// How long a stat result stays trusted (0: stat on every use).
    revalidate: Duration,
    /// The time of the request being served.
    now: Instant,
    /// Reused to build lookup keys without allocating.
    key: String,
    boundary: String,
}

impl FileCache {
    pub fn new(max_bytes: u64, max_file_bytes: u64, revalidate: Duration) -> FileCache {
        let seed = std::time::SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_nanos();
        FileCache {
            map: FxHashMap::default(),
            bytes: 0,
            max_bytes,
            max_file_bytes,
            open_files: 0,
            revalidate,
            now: Instant::now(),
            key: String::with_capacity(256),
            boundary: format!("stoa{:016x}{:08x}", seed as u64, std::process::id()),
        }
    }

    pub fn set_limits(&mut self, max_bytes: u64, max_file_bytes: u64, revalidate: Duration) {
        self.revalidate = revalidate;
        if (max_bytes, max_file_bytes) != (self.max_bytes, self.max_file_bytes) {
            self.map.clear();
            self.bytes = 0;
            self.open_files = 0;
            self.max_bytes = max_bytes;
            self.max_file_bytes = max_file_bytes;
        }
        // Close every kept descriptor (called on reload): a reload is how an
        // operator makes sure nothing of the old tree stays open.
        let before = self.map.len();
        self.map.retain(|_, e| e.file.is_none());
        self.bytes -= (before - self.map.len()) as u64 * ENTRY_COST;
        self.open_files = 0;
    }

    /// What an entry costs against `max_bytes`.
    fn cost(e: &Entry) -> u64 {
        e.body.as_ref().map_or(0, |b| b.len() as u64) + ENTRY_COST
    }

    fn forget(&mut self, old: &Entry) {
        self.bytes -= FileCache::cost(old);
        if old.file.is_some() {
            self.open_files -= 1;
        }
    }

    /// The entry for `key` if a stat confirmed it less than `revalidate`
    /// ago: then the file is served without touching the file system.
    fn fresh(&self, key: &str) -> Option<Rc<Entry>> {
        let e = self.map.get(key)?;
        (self.now.saturating_duration_since(e.checked.get()) < self.revalidate).then(|| e.clone())
    }

    fn insert(&mut self, key: &str, mut e: Entry) -> Rc<Entry> {
        let cost = FileCache::cost(&e);
        if let Some(old) = self.map.remove(key) {
            self.forget(&old);
        }
        if self.bytes + cost > self.max_bytes {
            // Make room by dropping about a quarter of the entries; the hash
            // order makes this a cheap random eviction.
            let drop: Vec<Box<str>> = self
                .map
                .keys()
                .take(self.map.len() / 4 + 1)
                .cloned()
                .collect();
            for k in drop {
                if let Some(old) = self.map.remove(&k) {
                    self.forget(&old);
                }
            }
        }
        if e.file.is_some() && self.open_files >= MAX_OPEN_FILES {
            // No room for another descriptor: this file is opened per
            // request, as all large files were before.
            e.file = None;
        }
        let e = Rc::new(e);
        if self.bytes + cost <= self.max_bytes {
            self.bytes += cost;
            if e.file.is_some() {
                self.open_files += 1;
            }
            self.map.insert(key.into(), e.clone());
        }
        e
    }
}

/// What an entry costs against the cache's byte budget, besides its body.
const ENTRY_COST: u64 = 256;

/// Descriptors of large files a worker keeps open (nginx's
/// `open_file_cache max=` is the analogue); well below the default
/// 1024-descriptor soft limit shared with the connections.
const MAX_OPEN_FILES: usize = 256;

/// Serves one request from a static route; `norm` is the request path,
/// decoded and normalized (`http::path::normalize`).
pub fn serve(cfg: &StaticConfig, ex: &mut Exchange<'_>, norm: &str) {
    CACHE.with(|c| match c.try_borrow_mut() {
        Ok(mut cache) => serve_cached(cfg, ex, norm, &mut cache),
        // Not reentrant; should a subrequest ever get here inside another
        // static response, it goes without the cache.
        Err(_) => {
            let mut cache = FileCache::new(0, 0, Duration::ZERO);
            serve_cached(cfg, ex, norm, &mut cache)
        }
    })
}

/// What [`serve`] would answer a bodyless GET for `norm` that carries no
/// conditional, range or `Accept-Encoding` field (a subrequest's, see
/// `route::include_head`), when the cache holds the file's body and a
/// stat confirmed it within `revalidate`: the 200's header block and
/// the body, shared with the cache. `None` whenever anything else could
/// happen (a script's name, a stale or missing entry, a large file): the
/// caller then runs [`serve`], which decides as always.
pub fn cached_whole(cfg: &StaticConfig, norm: &str) -> Option<(Bytes, Bytes)> {
    if cfg.is_script_path(norm) {
        return None;
    }
    let rel = match &cfg.strip {
        Some(p) => match norm.strip_prefix(p.as_str()) {
            Some(r) if r.starts_with('/') => r,
            _ => "/",
        },
        None => norm,
    };
    CACHE.with(|c| {
        let mut cache = c.try_borrow_mut().ok()?;
        let mut key = std::mem::take(&mut cache.key);
        key.clear();
        key.push_str(&cfg.root_str);
        key.push_str(rel);
        cache.now = Instant::now();
        let hit = cache
            .fresh(&key)
            .and_then(|e| Some((e.headers.clone(), e.body.clone()?)));
        cache.key = key;
        hit
    })
}

thread_local! {
    /// This worker thread's cache (each worker is one thread). Not in
    /// `local`, which cannot name a handler's type (see local.rs).
    static CACHE: std::cell::RefCell<FileCache> = std::cell::RefCell::new(FileCache::new(
        64 << 20,
        64 * 1024,
        Duration::from_secs(1),
    ));
}

/// Sets this worker's cache limits (at start and on reload): a change of
/// size limits empties it.
pub fn set_cache_limits(max_bytes: u64, max_file_bytes: u64, revalidate: Duration) {
    CACHE.with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            c.set_limits(max_bytes, max_file_bytes, revalidate);
        }
    });
}

fn serve_cached(cfg: &StaticConfig, ex: &mut Exchange<'_>, norm: &str, cache: &mut FileCache) {
    let req = ex.req();
    match &req.method {
        Method::Get | Method::Head => {}
        Method::Options => {
            ex.start(204);
            ex.header("Allow", ALLOW);
            ex.end_head(None);
            return;
        }
        m => {
            ex.error(m.not_allowed_status(), &[("Allow", ALLOW)]);
            return;
        }
    }
    if cfg.is_script_path(norm) {
        tracing::warn!("static: {norm} is a script of this site; not served as a file");
        ex.error(403, &[]);
        return;
    }
    let rel = match &cfg.strip {
        Some(p) => match norm.strip_prefix(p.as_str()) {
            Some(r) if r.starts_with('/') => r,
            _ => "/",
        },
        None => norm,
    };
    let mut key = std::mem::take(&mut cache.key);
    key.clear();
    key.push_str(&cfg.root_str);
    key.push_str(rel);
    cache.now = Instant::now();
    match cache.fresh(&key) {
        Some(e) if e.body.is_some() || e.file.is_some() => {
            let f = e.file.clone();
            serve_entry(cfg, req, cache, ex, &mut key, e, f)
        }
        _ => serve_path(cfg, req, cache, ex, norm, &mut key),
    }
    cache.key = key;
}

fn serve_path(
    cfg: &StaticConfig,
    req: &RequestHead,
    cache: &mut FileCache,
    ex: &mut Exchange<'_>,
    norm: &str,
    key: &mut String,
) {
    let meta = match std::fs::metadata(key.as_str()) {
        Ok(m) => m,
        Err(e) => {
            let status = refused(&e, key, ex);
            return ex.error(status, &[]);
        }
    };
    if meta.is_dir() {
        if !norm.ends_with('/') {
            let mut loc = path::encode(norm);
            loc.push('/');
            if let Some(q) = req.query() {
                loc.push('?');
                loc.push_str(&String::from_utf8_lossy(q));
            }
            return ex.error(301, &[("Location", loc.as_bytes())]);
        }
        let dir_len = key.len();
        for name in &cfg.index {
            if cfg.is_script(name) {
                // Routing runs a script index; it is never shown here.
                continue;
            }
            key.truncate(dir_len);
            key.push_str(name);
            if let Ok(m) = std::fs::metadata(key.as_str()) {
                if m.is_file() {
                    return serve_file(cfg, req, cache, ex, key, &m, name);
                }
            }
        }
        key.truncate(dir_len);
        if cfg.autoindex {
            return serve_listing(cfg, ex, norm, key);
        }
        return ex.error(403, &[]);
    }
    if !meta.is_file() {
        return ex.error(403, &[]);
    }
    let name = file_name(norm);
    serve_file(cfg, req, cache, ex, key, &meta, name)
}

/// The last segment of a path (after its last '/'). A byte search: the
/// `str` pattern searcher `rsplit('/')` sets up was 3 % of a small file's
/// instructions.
fn file_name(path: &str) -> &str {
    match path.as_bytes().iter().rposition(|&b| b == b'/') {
        // '/' is ASCII, so the byte after it starts a character.
        Some(i) => &path[i + 1..],
        None => path,
    }
}

/// The status for a file that could not be opened or read. One the
/// server may not read (EACCES: its mode or owner) is logged with the
/// path, as nginx logs `open() "..." failed (13: Permission denied)`:
/// the operator sees why the 403 came. (Symlinks leading out of the root
/// are logged where they are refused.)
fn refused(e: &io::Error, path: &str, ex: &Exchange<'_>) -> u16 {
    if e.raw_os_error() == Some(libc::EACCES) {
        tracing::warn!("static: {path}: {e} (403); {}", ex.who());
    }
    status_for(e)
}

fn status_for(e: &io::Error) -> u16 {
    match e.kind() {
        io::ErrorKind::PermissionDenied => 403,
        _ if e.raw_os_error() == Some(libc::ENAMETOOLONG) => 414,
        _ => 404,
    }
}

/// Finds or (re)loads the cache entry for `key`, whose stat is `meta`.
fn lookup(
    cfg: &StaticConfig,
    cache: &mut FileCache,
    key: &str,
    meta: &Metadata,
    name: &str,
) -> io::Result<(Rc<Entry>, Option<Rc<File>>)> {
    if let Some(e) = cache.map.get(key) {
        if e.same_file(meta) {
            e.checked.set(cache.now);
            let e = e.clone();
            if e.body.is_some() || e.file.is_some() {
                let f = e.file.clone();
                return Ok((e, f));
            }
            let f = open_beneath(cfg, &key[cfg.root_str.len()..])?;
            return Ok((e, Some(Rc::new(f))));
        }
    }
    let file = open_beneath(cfg, &key[cfg.root_str.len()..])?;
    let m = file.metadata()?;
    if !m.is_file() {
        return Err(io::ErrorKind::PermissionDenied.into());
    }
    let body = if m.size() <= cache.max_file_bytes {
        let mut buf = Vec::with_capacity(m.size() as usize);
        (&file).take(m.size()).read_to_end(&mut buf)?;
        if buf.len() as u64 != m.size() {
            // Changed while reading: serve nothing stale, try next time.
            return Err(io::ErrorKind::Interrupted.into());
        }
        Some(Bytes::from(buf))
    } else {
        None
    };
    let keep_file = body.is_none();
    let file = Rc::new(file);
    let mut entry = make_entry(&m, name, body);
    if keep_file {
        entry.file = Some(file.clone());
    }
    let e = cache.insert(key, entry);
    Ok((e, keep_file.then_some(file)))
}

fn make_entry(m: &Metadata, name: &str, body: Option<Bytes>) -> Entry {
    let modified = u64::try_from(m.mtime()).unwrap_or(0);
    let known = known_type(name);
    let untyped = known.is_none();
    let (content_type, compressible) = known.unwrap_or(UNTYPED);
    // Size and mtime to the nanosecond: a same-size rewrite within one
    // second still changes the tag (Last-Modified cannot tell).
    let etag = format!("\"{:x}-{:x}-{:x}\"", modified, m.size(), m.mtime_nsec())
        .into_bytes()
        .into_boxed_slice();
    let mut h = Vec::with_capacity(160);
    h.extend_from_slice(b"Content-Type: ");
    h.extend_from_slice(content_type.as_bytes());
    h.extend_from_slice(b"\r\nAccept-Ranges: bytes\r\n");
    // The fields a 304 keeps come last, so that it sends a tail of the
    // same block.
    let validators_at = h.len();
    h.extend_from_slice(b"Last-Modified: ");
    h.extend_from_slice(
        httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(modified)).as_bytes(),
    );
    h.extend_from_slice(b"\r\nETag: ");
    h.extend_from_slice(&etag);
    h.extend_from_slice(b"\r\n");
    if compressible {
        h.extend_from_slice(b"Vary: Accept-Encoding\r\n");
    }
    Entry {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime: (m.mtime(), m.mtime_nsec()),
        modified,
        etag,
        content_type,
        untyped,
        headers: Bytes::from(h),
        h2_headers: OnceCell::new(),
        validators_at,
        compressible,
        body,
        file: None,
        checked: Cell::new(Instant::now()),
    }
}

/// The type of a file whose extension names none (RFC 9110 §8.3: the
/// recipient may then treat it as this).
const UNTYPED: (&str, bool) = ("application/octet-stream", false);

/// The media type for a file name, with `charset=utf-8` for text, and
/// whether precompressed variants are worth looking for; None when the
/// extension names no type.
fn known_type(name: &str) -> Option<(&'static str, bool)> {
    let (_, ext) = name.rsplit_once('.')?;
    // The commonest types first, without allocating.
    let known = match ext {
        "html" | "htm" => Some(("text/html; charset=utf-8", true)),
        "css" => Some(("text/css; charset=utf-8", true)),
        "js" | "mjs" => Some(("text/javascript; charset=utf-8", true)),
        "json" => Some(("application/json", true)),
        "txt" => Some(("text/plain; charset=utf-8", true)),
        "svg" => Some(("image/svg+xml", true)),
        "xml" => Some(("application/xml", true)),
        "png" => Some(("image/png", false)),
        "jpg" | "jpeg" => Some(("image/jpeg", false)),
        "gif" => Some(("image/gif", false)),
        "webp" => Some(("image/webp", false)),
        "ico" => Some(("image/x-icon", false)),
        "woff2" => Some(("font/woff2", false)),
        "wasm" => Some(("application/wasm", true)),
        "bin" => Some(("application/octet-stream", false)),
        _ => None,
    };
    if known.is_some() {
        return known;
    }
    match mime_guess::from_ext(ext).first_raw() {
        Some(t) if t.starts_with("text/") => {
            // Leaked once per distinct text type (a handful at most), so
            // entries can hold a &'static str.
            Some((text_with_charset(t), true))
        }
        Some(t) => Some((
            t,
            t.ends_with("+xml") || t.ends_with("json") || t.ends_with("javascript"),
        )),
        None => None,
    }
}

fn text_with_charset(t: &'static str) -> &'static str {
    use std::sync::Mutex;
    static SEEN: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let want = format!("{t}; charset=utf-8");
    let Ok(mut seen) = SEEN.lock() else { return t };
    if let Some(s) = seen.iter().find(|s| **s == want) {
        return s;
    }
    let s: &'static str = Box::leak(want.into_boxed_str());
    seen.push(s);
    s
}

/// Opens `rel` (starting with '/') beneath the root ([`Root::open_beneath`]).
fn open_beneath(cfg: &StaticConfig, rel: &str) -> io::Result<File> {
    cfg.root.open_beneath(rel, cfg.follow_symlinks)
}

/// Which precompressed variants an `Accept-Encoding` value takes (zstd,
/// br, gzip).
fn accepted_encodings(ae: &[u8]) -> (bool, bool, bool) {
    let (mut zst, mut br, mut gz) = (false, false, false);
    for item in stoa_h1::list_items(ae) {
        let mut parts = item.split(|&b| b == b';');
        let coding = stoa_h1::trim(parts.next().unwrap_or(b""));
        let zero_q = parts.any(|p| {
            let p = stoa_h1::trim(p);
            (p.starts_with(b"q=") || p.starts_with(b"Q="))
                && p[2..].iter().all(|&c| c == b'0' || c == b'.')
        });
        if zero_q {
            continue;
        }
        // The commonest first: every browser sends gzip.
        if coding.eq_ignore_ascii_case(b"gzip") || coding.eq_ignore_ascii_case(b"x-gzip") {
            gz = true;
        } else if coding.eq_ignore_ascii_case(b"br") {
            br = true;
        } else if coding.eq_ignore_ascii_case(b"zstd") {
            zst = true;
        } else if coding == b"*" {
            zst = true;
            br = true;
            gz = true;
        }
    }
    (zst, br, gz)
}

fn serve_file(
    cfg: &StaticConfig,
    req: &RequestHead,
    cache: &mut FileCache,
    ex: &mut Exchange<'_>,
    key: &mut String,
    meta: &Metadata,
    name: &str,
) {
    match lookup(cfg, cache, key, meta, name) {
        Ok((entry, file)) => serve_entry(cfg, req, cache, ex, key, entry, file),
        Err(e) => {
            let status = refused(&e, key, ex);
            ex.error(status, &[]);
        }
    }
}

/// Serves a file's entry, or its precompressed sibling when the client
/// takes it. `key` is the file's path.
fn serve_entry(
    cfg: &StaticConfig,
    req: &RequestHead,
    cache: &mut FileCache,
    ex: &mut Exchange<'_>,
    key: &mut String,
    entry: Rc<Entry>,
    file: Option<Rc<File>>,
) {
    let ae = if entry.compressible {
        req.header("accept-encoding")
    } else {
        None
    };
    if let Some(ae) = ae {
        let (zst, br, gz) = accepted_encodings(ae);
        let base_len = key.len();
        // zstd first, as `compress` prefers it: as small as brotli's at a
        // fraction of the decoding cost.
        for (ok, ext, coding) in [
            (zst, ".zst", &b"zstd"[..]),
            (br, ".br", b"br"),
            (gz, ".gz", b"gzip"),
        ] {
            if !ok {
                continue;
            }
            key.truncate(base_len);
            key.push_str(ext);
            let variant = match cache.fresh(key) {
                Some(v) if v.body.is_some() || v.file.is_some() => {
                    let f = v.file.clone();
                    Some((v, f))
                }
                _ => std::fs::metadata(key.as_str())
                    .ok()
                    .filter(Metadata::is_file)
                    .and_then(|vm| {
                        // The variant's media type is the original file's.
                        let name = file_name(&key[..base_len]).to_owned();
                        lookup(cfg, cache, key, &vm, &name).ok()
                    }),
            };
            if let Some((ventry, vfile)) = variant {
                key.truncate(base_len);
                return respond(req, ex, &ventry, vfile, Some(coding), &cache.boundary);
            }
        }
        key.truncate(base_len);
    }
    respond(req, ex, &entry, file, None, &cache.boundary)
}

/// The entry's header block; a file whose extension names no type gets
/// the route's `default_type` in place of the block's first field
/// (`Content-Type`, always first).
fn push_fields(ex: &mut Exchange<'_>, e: &Entry) {
    match &ex.edge().default_type {
        Some(t) if e.untyped => {
            ex.header("Content-Type", t);
            let rest = e
                .headers
                .iter()
                .position(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            ex.raw_headers(&e.headers[rest..]);
        }
        _ => ex.cached_headers(&e.headers, &e.h2_headers),
    }
}

fn respond(
    req: &RequestHead,
    ex: &mut Exchange<'_>,
    e: &Entry,
    file: Option<Rc<File>>,
    encoding: Option<&[u8]>,
    boundary: &str,
) {
    let cond = conditional::Request {
        is_get_or_head: true,
        if_match: req.header("if-match"),
        if_none_match: req.header("if-none-match"),
        if_modified_since: req.header("if-modified-since"),
        if_unmodified_since: req.header("if-unmodified-since"),
    };
    match conditional::evaluate(&cond, &e.etag, e.modified) {
        conditional::Outcome::Proceed => {}
        conditional::Outcome::NotModified => {
            // Only what updates a cache: no Content-Type, no Accept-Ranges
            // (RFC 9110 §15.4.5).
            ex.start(304);
            ex.raw_headers(&e.headers[e.validators_at..]);
            ex.end_head(None);
            return;
        }
        conditional::Outcome::PreconditionFailed => return ex.error(412, &[]),
    }

    let mut ranges = range::Ranges::Ignore;
    if req.method == Method::Get {
        if let Some(r) = req.header("range") {
            let honour = match req.header("if-range") {
                Some(ir) => conditional::if_range_matches(ir, &e.etag, e.modified),
                None => true,
            };
            if honour {
                ranges = range::parse(r, e.size);
            }
        }
    }
    match ranges {
        range::Ranges::Ignore => {
            ex.start(200);
            push_fields(ex, e);
            if let Some(c) = encoding {
                ex.header("Content-Encoding", c);
            }
            ex.end_head(Some(e.size));
            // A response filter (compress) may answer this version of the
            // file with what it made of it before.
            ex.body_version(|| FileVersion {
                dev: e.dev,
                ino: e.ino,
                size: e.size,
                mtime: e.mtime,
            });
            body(ex, e, &file, 0..e.size);
        }
        range::Ranges::Unsatisfiable => {
            let cr = range::unsatisfied_range(e.size);
            ex.error(416, &[("Content-Range", cr.as_bytes())]);
        }
        range::Ranges::Satisfiable(rs) if rs.len() == 1 => {
            let r = rs[0].clone();
            ex.start(206);
            push_fields(ex, e);
            if let Some(c) = encoding {
                ex.header("Content-Encoding", c);
            }
            ex.header("Content-Range", range::content_range(&r, e.size).as_bytes());
            ex.end_head(Some(r.end - r.start));
            body(ex, e, &file, r);
        }
        range::Ranges::Satisfiable(rs) => {
            let ctype = match (&ex.edge().default_type, e.untyped) {
                (Some(t), true) => std::str::from_utf8(t).unwrap_or(e.content_type),
                _ => e.content_type,
            };
            let plan = range::multipart(&rs, e.size, ctype, boundary);
            ex.start(206);
            // The part headers carry Content-Type; the message's is multipart.
            for line in e.headers.split(|&b| b == b'\n') {
                if !line.is_empty() && !line.starts_with(b"Content-Type:") {
                    ex.raw_headers(line);
                    ex.raw_headers(b"\n");
                }
            }
            ex.header(
                "Content-Type",
                range::multipart_content_type(boundary).as_bytes(),
            );
            if let Some(c) = encoding {
                ex.header("Content-Encoding", c);
            }
            ex.end_head(Some(plan.content_length));
            for (part_head, r) in plan.parts {
                ex.write(&part_head);
                body(ex, e, &file, r);
            }
            ex.write(&plan.trailer);
        }
    }
}

fn body(ex: &mut Exchange<'_>, e: &Entry, file: &Option<Rc<File>>, r: std::ops::Range<u64>) {
    match (&e.body, file) {
        (Some(b), _) => ex.body_mem(b.slice(r.start as usize..r.end as usize)),
        (None, Some(f)) => ex.body_file(f.clone(), r.start, r.end - r.start),
        (None, None) => {}
    }
}

fn serve_listing(cfg: &StaticConfig, ex: &mut Exchange<'_>, norm: &str, dir: &str) {
    // A symlinked directory must not list what is outside the root.
    match Path::new(dir).canonicalize() {
        Ok(c) if c.starts_with(&cfg.root.path) => {}
        _ => return ex.error(403, &[]),
    }
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => {
            let status = refused(&e, dir, ex);
            return ex.error(status, &[]);
        }
    };
    let mut entries = Vec::new();
    for de in rd.flatten() {
        let name = de.file_name();
        let Some(name) = name.to_str() else { continue };
        let Ok(m) = de.metadata() else { continue };
        let ft = m.file_type();
        if ft.is_fifo() || ft.is_socket() || ft.is_block_device() || ft.is_char_device() {
            continue;
        }
        let is_dir = std::fs::metadata(de.path())
            .map(|m| m.is_dir())
            .unwrap_or(false);
        entries.push(autoindex::Entry {
            name: name.to_owned(),
            is_dir,
            size: m.size(),
            modified: u64::try_from(m.mtime()).unwrap_or(0),
        });
        if entries.len() >= 100_000 {
            break;
        }
    }
    let page = autoindex::render(norm, &mut entries);
    ex.start(200);
    ex.header("Content-Type", b"text/html; charset=utf-8");
    ex.end_head(Some(page.len() as u64));
    ex.body_mem(Bytes::from(page.into_bytes()));
}

// ---- configuration: `static = {...}` and `alias = "DIR"` of a route ----

/// `static = {...}`: files under a root (the site's unless given).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticRouteConfig {
    pub root: Option<String>,
    pub index: Option<Vec<String>>,
    pub autoindex: Option<bool>,
}

impl super::configure::Configure for StaticRouteConfig {
    fn configure(
        &self,
        cx: &super::configure::Ctx<'_>,
    ) -> Result<super::Handler, super::configure::Fail> {
        use super::configure::Fail;
        let root = match (&self.root, &cx.site.root) {
            (Some(r), _) => (cx.resolve)(r),
            (None, Some(r)) => r.clone(),
            (None, None) => return Err(Fail::new("static.root", "no root here or on the site")),
        };
        let cfg = cx
            .site
            .open_static(
                &root,
                self.index.clone().unwrap_or_else(|| cx.site.index.clone()),
                self.autoindex.unwrap_or(cx.site.autoindex),
                None,
            )
            .map_err(Fail::at("static.root"))?;
        Ok(super::Handler::Static(std::sync::Arc::new(cfg)))
    }
}

/// `alias = "DIR"`: static files from this directory, the part of the
/// path after the route's prefix mapped into it (nginx `alias`).
#[derive(Debug, serde::Deserialize)]
#[serde(transparent)]
pub struct Alias(pub String);

impl super::configure::Configure for Alias {
    fn configure(
        &self,
        cx: &super::configure::Ctx<'_>,
    ) -> Result<super::Handler, super::configure::Fail> {
        use super::configure::Fail;
        let Some(prefix) = cx.prefix else {
            return Err(Fail::new(
                "alias",
                "needs a `prefix` route (the prefix maps onto the directory)",
            ));
        };
        let cfg = cx
            .site
            .open_static(
                &(cx.resolve)(&self.0),
                cx.site.index.clone(),
                cx.site.autoindex,
                Some(prefix.trim_end_matches('/')),
            )
            .map_err(Fail::at("alias"))?;
        Ok(super::Handler::Static(std::sync::Arc::new(cfg)))
    }
}
