//! Server-side includes: a page under the site root, read in chunks and
//! run through `stoa_ssi::Page` as it is read, so that output starts before
//! the page is parsed to its end and memory is bounded by one chunk plus
//! one directive. What the page asks for is done here: `include virtual`
//! (and `include file`, `exec cgi`) as subrequests through routing (the
//! [`Include`] hook), `flastmod`/`fsize` by a stat beneath the root, `exec
//! cmd` by `/bin/sh` with a time limit (only with `exec = true`: a page
//! that may run commands is a shell for whoever can write pages,
//! CVE-2009-1195).
//!
//! Parsed pages ([`Template`]s) up to [`MAX_TEMPLATE`] bytes are cached
//! per worker and revalidated like the static file cache: a stat within
//! `[cache] revalidate` of the last is not made again, and a change of
//! inode, size or mtime parses the file anew. Larger pages are streamed
//! through the parser as they are read, as before. The page's variables
//! (the CGI ones and mod_include's) are made only when the page, a page
//! it includes or a command it runs reads one.

use crate::exchange::{Exchange, Include};
use crate::fs::Root;
use crate::gateway::{self, Names};
use crate::handler::Outcome;
use std::borrow::Cow;
use std::cell::{OnceCell, RefCell};
use std::ffi::CStr;
use std::future::Future;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use stoa_h1::{Method, RequestHead};
use stoa_ssi::{
    Action, Env, ExecKind, FileStat, InfoKind, Page, Settings, SizeFmt, Source, Template, Times,
    VarList, Zone,
};
use tokio::io::AsyncReadExt;

/// How much of the page is read at a time: output leaves after each read.
pub const CHUNK: usize = 16 * 1024;

/// What the config file says (`ssi = {...}`), before validation.
#[derive(Debug, Default)]
pub struct SsiSpec {
    pub exec: bool,
    pub last_modified: bool,
    pub errmsg: Option<String>,
    pub timefmt: Option<String>,
    pub sizefmt: Option<String>,
    pub echomsg: Option<String>,
    pub exec_timeout: Option<Duration>,
    pub max_include: Option<u64>,
    pub max_directive: Option<u64>,
    pub follow_symlinks: bool,
    /// DOCUMENT_ROOT for the CGI variables.
    pub document_root: String,
}

/// An `ssi` route, validated.
#[derive(Debug)]
pub struct SsiConfig {
    root: Root,
    follow_symlinks: bool,
    /// The starting `config` values and whether `exec` may run, shared
    /// by the pages' runs.
    settings: std::sync::Arc<Settings>,
    /// Send Last-Modified (Apache `XBitHack full`).
    last_modified: bool,
    exec_timeout: Duration,
    /// Body bytes kept from one include or `exec cmd`.
    pub max_include: usize,
    document_root: std::sync::Arc<str>,
    /// `root.path_str`, shared with the pages' lazy variables.
    root_str: std::sync::Arc<str>,
}

impl SsiConfig {
    pub fn new(root: &std::path::Path, spec: SsiSpec) -> Result<SsiConfig, String> {
        let mut settings = Settings {
            exec: spec.exec,
            ..Settings::default()
        };
        if let Some(m) = spec.errmsg {
            settings.errmsg = m.into_bytes();
        }
        if let Some(t) = spec.timefmt {
            settings.timefmt = t.into_bytes();
        }
        if let Some(e) = spec.echomsg {
            settings.echomsg = e.into_bytes();
        }
        settings.sizefmt = match spec.sizefmt.as_deref() {
            None | Some("abbrev") => SizeFmt::Abbrev,
            Some("bytes") => SizeFmt::Bytes,
            Some(o) => return Err(format!("sizefmt `{o}`: write \"abbrev\" or \"bytes\"")),
        };
        if let Some(n) = spec.max_directive {
            if !(64..=1 << 20).contains(&n) {
                return Err("max_directive: between 64 bytes and 1 MiB".into());
            }
            settings.max_directive = n as usize;
        }
        let max_include = spec.max_include.unwrap_or(16 << 20);
        if max_include == 0 || max_include > 1 << 30 {
            return Err("max_include: between 1 byte and 1 GiB".into());
        }
        let root = Root::open(root)?;
        Ok(SsiConfig {
            root_str: root.path_str.as_str().into(),
            root,
            follow_symlinks: spec.follow_symlinks,
            settings: settings.into(),
            last_modified: spec.last_modified,
            exec_timeout: spec.exec_timeout.unwrap_or(Duration::from_secs(10)),
            max_include: max_include as usize,
            document_root: spec.document_root.into(),
        })
    }
}

/// What nested pages share with the page that included them: Apache runs
/// a nested page in the base document's environment (its DOCUMENT_URI,
/// LAST_MODIFIED...), and `set` in one is seen by the other.
#[derive(Debug, Default)]
pub struct Shared {
    base: Option<(Rc<BaseVars>, Times)>,
    set: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The outermost page's variables, made on first use from what was
/// copied of its request.
#[derive(Debug)]
struct BaseVars {
    vars: OnceCell<VarList>,
    head: stoa_h1::RequestHead,
    info: gateway::ConnInfo,
    norm: String,
    root: std::sync::Arc<str>,
    document_root: std::sync::Arc<str>,
    uid: u32,
    extra: Vec<(String, Vec<u8>)>,
}

impl BaseVars {
    fn vars(&self) -> &VarList {
        self.vars.get_or_init(|| page_vars(self))
    }
}

/// What the outermost page's [`BaseVars`] are made of, borrowed until a
/// variable is read or a handler is included: most pages do neither, and
/// copying the request for them cost an SSI page ~4 % of its instructions.
struct Origin<'a> {
    head: &'a RequestHead,
    info: gateway::ConnInfo,
    norm: &'a str,
    root: &'a std::sync::Arc<str>,
    document_root: &'a std::sync::Arc<str>,
    uid: u32,
    extra: &'a [(String, Vec<u8>)],
}

/// The variables a page sees: the outermost page's, made on first use.
/// A nested page requested with a query sees that query as its
/// `QUERY_STRING` and `QUERY_STRING_UNESCAPED` (Apache's include.t,
/// virtual.shtml: the header included with `?mod_include test` prints
/// it); everything else, `DOCUMENT_ARGS` included, is the outermost
/// page's. Apache writes the nested query into the table it shares with
/// the including page, which then keeps it after the include; here the
/// including page keeps its own, as mod_include's documentation says of
/// the "active SSI document".
enum PageEnv<'a> {
    Outermost(OnceCell<Rc<BaseVars>>, Origin<'a>),
    Nested(Rc<BaseVars>, Option<Vec<u8>>),
}

impl PageEnv<'_> {
    fn base(&self) -> &Rc<BaseVars> {
        let (cell, o) = match self {
            PageEnv::Nested(b, _) => return b,
            PageEnv::Outermost(cell, o) => (cell, o),
        };
        cell.get_or_init(|| {
            Rc::new(BaseVars {
                vars: OnceCell::new(),
                head: o.head.clone(),
                info: o.info.clone(),
                norm: o.norm.to_owned(),
                root: o.root.clone(),
                document_root: o.document_root.clone(),
                uid: o.uid,
                extra: o.extra.to_vec(),
            })
        })
    }
}

impl PageEnv<'_> {
    /// This page's own value of `name` where it differs from the
    /// outermost page's.
    fn own(&self, name: &[u8]) -> Option<Vec<u8>> {
        let PageEnv::Nested(_, Some(query)) = self else {
            return None;
        };
        match name {
            b"QUERY_STRING" => Some(query.clone()),
            b"QUERY_STRING_UNESCAPED" => Some(stoa_ssi::format::query_string_unescaped(query)),
            _ => None,
        }
    }
}

impl Env for PageEnv<'_> {
    fn var(&self, name: &[u8]) -> Option<Cow<'_, [u8]>> {
        if let Some(v) = self.own(name) {
            return Some(Cow::Owned(v));
        }
        self.base().vars().var(name)
    }

    fn for_each_var(&self, f: &mut dyn FnMut(&[u8], &[u8])) {
        if !matches!(self, PageEnv::Nested(_, Some(_))) {
            return self.base().vars().for_each_var(f);
        }
        // QUERY_STRING is always in the base list (a CGI variable);
        // QUERY_STRING_UNESCAPED only when the outermost page had a query.
        let mut unescaped = false;
        self.base().vars().for_each_var(&mut |n, v| {
            unescaped |= n == b"QUERY_STRING_UNESCAPED";
            match self.own(n) {
                Some(own) => f(n, &own),
                None => f(n, v),
            }
        });
        if !unescaped {
            if let Some(own) = self.own(b"QUERY_STRING_UNESCAPED") {
                f(b"QUERY_STRING_UNESCAPED", &own);
            }
        }
    }

    fn zone(&self, t: i64) -> Zone {
        local_zone(t)
    }
}

/// Pages larger than this are not cached: they stream through the parser.
pub const MAX_TEMPLATE: u64 = 256 * 1024;

/// What one worker's template cache may hold.
const MAX_TEMPLATE_BYTES: usize = 16 << 20;

/// A cached page, with what identifies the file it was parsed from.
struct Cached {
    template: Rc<Template>,
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    uid: u32,
    /// When a stat last confirmed it.
    checked: Instant,
    cost: usize,
}

/// One worker's parsed pages, by file path.
#[derive(Default)]
struct Templates {
    /// FxHash: SipHash of the key was 3 % of an SSI page.
    map: rustc_hash::FxHashMap<Box<str>, Cached>,
    bytes: usize,
    /// How long a stat stays trusted (the `[cache] revalidate` of the
    /// static files).
    revalidate: Duration,
    key: String,
}

impl Templates {
    fn insert(&mut self, key: &str, c: Cached) {
        if let Some(old) = self.map.remove(key) {
            self.bytes -= old.cost;
        }
        if c.cost > MAX_TEMPLATE_BYTES {
            return;
        }
        if self.bytes + c.cost > MAX_TEMPLATE_BYTES {
            // Drop about a quarter (hash order: a cheap random eviction),
            // as the static file cache does.
            let drop: Vec<Box<str>> = self
                .map
                .keys()
                .take(self.map.len() / 4 + 1)
                .cloned()
                .collect();
            for k in drop {
                if let Some(old) = self.map.remove(&k) {
                    self.bytes -= old.cost;
                }
            }
        }
        if self.bytes + c.cost <= MAX_TEMPLATE_BYTES {
            self.bytes += c.cost;
            self.map.insert(key.into(), c);
        }
    }
}

thread_local! {
    static TEMPLATES: RefCell<Templates> = RefCell::new(Templates {
        revalidate: Duration::from_secs(1),
        ..Templates::default()
    });
}

/// Sets how long this worker trusts a page's stat (at start and on
/// reload, with the static file cache's `revalidate`); a reload empties
/// the cache.
pub fn set_template_revalidate(revalidate: Duration) {
    TEMPLATES.with(|t| {
        let mut t = t.borrow_mut();
        t.map.clear();
        t.bytes = 0;
        t.revalidate = revalidate;
    });
}

/// The page to run: parsed from the cache, or the open file to stream.
enum Run {
    Template(Rc<Template>),
    File(std::fs::File),
}

/// What the page is and where it comes from, or the status to answer.
fn open_page(cfg: &SsiConfig, norm: &str) -> Result<(Run, u32, i64), u16> {
    let now = Instant::now();
    let hit = TEMPLATES.with(|t| {
        let mut t = t.borrow_mut();
        let mut key = std::mem::take(&mut t.key);
        key.clear();
        key.push_str(&cfg.root.path_str);
        key.push_str(norm);
        let hit = t
            .map
            .get(key.as_str())
            .filter(|c| now.saturating_duration_since(c.checked) < t.revalidate)
            .map(|c| (c.template.clone(), c.uid, c.mtime.0));
        t.key = key;
        hit
    });
    if let Some((tpl, uid, mtime)) = hit {
        return Ok((Run::Template(tpl), uid, mtime));
    }
    let mut file = match cfg.root.open_beneath(norm, cfg.follow_symlinks) {
        Ok(f) => f,
        Err(e) => {
            return Err(match e.kind() {
                std::io::ErrorKind::NotFound => 404,
                std::io::ErrorKind::PermissionDenied => 403,
                _ => {
                    tracing::error!("ssi: {}{norm}: {e}", cfg.root.path_str);
                    500
                }
            })
        }
    };
    let meta = match file.metadata() {
        Ok(m) if m.is_file() => m,
        // A directory or a FIFO named like a page: nothing to parse.
        Ok(_) => return Err(403),
        Err(e) => {
            tracing::error!("ssi: {}{norm}: {e}", cfg.root.path_str);
            return Err(500);
        }
    };
    let key = format!("{}{norm}", cfg.root.path_str);
    let same = TEMPLATES.with(|t| {
        let mut t = t.borrow_mut();
        let c = t.map.get_mut(key.as_str())?;
        let same = c.ino == meta.ino()
            && c.dev == meta.dev()
            && c.size == meta.size()
            && c.mtime == (meta.mtime(), meta.mtime_nsec())
            && c.uid == meta.uid();
        if same {
            c.checked = now;
            Some(c.template.clone())
        } else {
            None
        }
    });
    if let Some(tpl) = same {
        return Ok((Run::Template(tpl), meta.uid(), meta.mtime()));
    }
    if meta.size() > MAX_TEMPLATE {
        return Ok((Run::File(file), meta.uid(), meta.mtime()));
    }
    let mut bytes = Vec::with_capacity(meta.size() as usize + 1);
    if let Err(e) = file.read_to_end(&mut bytes) {
        tracing::error!("ssi: reading {}{norm}: {e}", cfg.root.path_str);
        return Err(500);
    }
    if bytes.len() as u64 != meta.size() {
        // Changing under us: serve what was read, keep nothing.
        let tpl = Rc::new(Template::parse(bytes, cfg.settings.max_directive));
        return Ok((Run::Template(tpl), meta.uid(), meta.mtime()));
    }
    let tpl = Rc::new(Template::parse(bytes, cfg.settings.max_directive));
    let cost = tpl.cost() + 256 + key.len();
    TEMPLATES.with(|t| {
        t.borrow_mut().insert(
            &key,
            Cached {
                template: tpl.clone(),
                dev: meta.dev(),
                ino: meta.ino(),
                size: meta.size(),
                mtime: (meta.mtime(), meta.mtime_nsec()),
                uid: meta.uid(),
                checked: now,
                cost,
            },
        )
    });
    Ok((Run::Template(tpl), meta.uid(), meta.mtime()))
}

/// Serves the page at `norm` (decoded, normalized) beneath the root.
/// `inc` runs subrequests; `shared` is the environment of the outermost
/// page; `extra` are an Authorizer's variables.
pub async fn serve(
    cfg: &SsiConfig,
    norm: String,
    ex: &mut Exchange<'_>,
    inc: &impl Include,
    shared: &RefCell<Shared>,
    extra: &[(String, Vec<u8>)],
) -> Outcome {
    let m = &ex.req().method;
    if *m != Method::Get && *m != Method::Head {
        let status = m.not_allowed_status();
        gateway::simple(ex, status, &[("Allow", b"GET, HEAD")]);
        return Outcome::Done;
    }
    let (source, uid, mtime) = match open_page(cfg, &norm) {
        Ok(p) => p,
        Err(status) => {
            gateway::simple(ex, status, &[]);
            return Outcome::Done;
        }
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (env, times) = {
        let sh = shared.borrow();
        match &sh.base {
            Some((base, times)) => (
                PageEnv::Nested(base.clone(), ex.req().query().map(<[u8]>::to_vec)),
                Times {
                    request: now,
                    last_modified: times.last_modified,
                },
            ),
            None => (
                PageEnv::Outermost(
                    OnceCell::new(),
                    Origin {
                        head: ex.req(),
                        info: gateway::ConnInfo::of(ex),
                        norm: &norm,
                        root: &cfg.root_str,
                        document_root: &cfg.document_root,
                        uid,
                        extra,
                    },
                ),
                Times {
                    request: now,
                    last_modified: mtime,
                },
            ),
        }
    };

    ex.start(200);
    ex.header("Content-Type", b"text/html");
    if cfg.last_modified {
        let t = UNIX_EPOCH + Duration::from_secs(mtime.max(0) as u64);
        ex.header("Last-Modified", httpdate::fmt_http_date(t).as_bytes());
    }
    // No ETag: the output changes with what is included, not with the file.
    ex.end_head_stream();
    if ex.is_head() {
        ex.finish();
        return Outcome::Done;
    }

    let mut page = Page::shared(cfg.settings.clone(), times);
    for (n, v) in &shared.borrow().set {
        page.set_var(n, v);
    }
    let mut doc = Doc {
        cfg,
        norm: &norm,
        env: &env,
        times,
        inc,
        shared,
    };
    match source {
        Run::Template(t) => {
            let mut pos = 0;
            while let Some(a) = page.next_in(&t, &mut pos, &env) {
                doc.act(a, &mut page, ex).await;
            }
            page.finish_template();
            while let Some(a) = page.next_in(&t, &mut pos, &env) {
                doc.act(a, &mut page, ex).await;
            }
        }
        Run::File(mut file) => {
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = match file.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        // The head is out: all that can be done is to end here.
                        tracing::error!("ssi: reading {}{norm}: {e}", cfg.root.path_str);
                        break;
                    }
                };
                let mut input = &buf[..n];
                while let Some(a) = page.next(&mut input, &env) {
                    doc.act(a, &mut page, ex).await;
                }
                if !ex.flush().await {
                    return Outcome::Done;
                }
            }
            page.finish();
            while let Some(a) = page.next(&mut &[][..], &env) {
                doc.act(a, &mut page, ex).await;
            }
        }
    }
    shared.borrow_mut().set = page.vars().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
    ex.finish();
    Outcome::Done
}

/// One page being served, for carrying out its actions.
struct Doc<'d, 'a, I> {
    cfg: &'d SsiConfig,
    norm: &'d str,
    env: &'d PageEnv<'a>,
    /// This page's times; the outermost page's are what nested pages see.
    times: Times,
    inc: &'d I,
    shared: &'d RefCell<Shared>,
}

impl<I: Include> Doc<'_, '_, I> {
    async fn act(&mut self, a: Action<'_>, page: &mut Page, ex: &mut Exchange<'_>) {
        match a {
            Action::Text(t) => ex.write(t),
            Action::Output(v) => ex.write(&v),
            Action::Include(src) => {
                let target = self.target(src);
                match self.subrequest(&target, page, ex).await {
                    Ok(()) => {}
                    Err(why) => page.failed(format!(
                        "unable to include \"{}\" in parsed file {}: {why}",
                        String::from_utf8_lossy(&target),
                        self.norm
                    )),
                }
            }
            Action::FileInfo { kind, source } => match self.stat(&source) {
                Ok(st) => page.file_info(st),
                Err(why) => page.failed(format!(
                    "unable to get information about \"{}\" in parsed file {} ({}): {why}",
                    String::from_utf8_lossy(match &source {
                        Source::Virtual(v) | Source::File(v) => v,
                    }),
                    self.norm,
                    match kind {
                        InfoKind::Flastmod => "flastmod",
                        InfoKind::Fsize => "fsize",
                    }
                )),
            },
            Action::Exec { kind, command } => {
                let res = match kind {
                    ExecKind::Cgi => {
                        let target = self.target(Source::Virtual(command.clone()));
                        self.subrequest(&target, page, ex).await
                    }
                    ExecKind::Cmd => self.exec_cmd(&command, ex).await,
                };
                if let Err(why) = res {
                    page.failed(format!(
                        "execution failure for \"{}\" in parsed file {}: {why}",
                        String::from_utf8_lossy(&command),
                        self.norm
                    ));
                }
            }
            Action::Error { errmsg, reason } => {
                tracing::error!("ssi: {}: {reason}", self.norm);
                ex.write(&errmsg);
            }
            Action::Warning(w) => tracing::warn!("ssi: {}: {w}", self.norm),
        }
    }

    /// The URL a source names: `virtual` relative to the page's URL,
    /// `file` relative to its directory (routed like `virtual`, so that
    /// an included page is parsed too, as in Apache).
    fn target(&self, src: Source) -> Vec<u8> {
        let slash = self.norm.bytes().rposition(|b| b == b'/');
        let dir = &self.norm[..slash.map_or(0, |i| i + 1)];
        match src {
            Source::Virtual(v) if v.starts_with(b"/") => v,
            Source::Virtual(v) => {
                let mut t = crate::http::path::encode(dir).into_bytes();
                t.extend_from_slice(&v);
                t
            }
            Source::File(f) => {
                let mut p = dir.to_owned();
                p.push_str(&String::from_utf8_lossy(&f));
                crate::http::path::encode(&p).into_bytes()
            }
        }
    }

    /// Runs `target` through routing and writes its body here; the body
    /// of an answer other than 200 is not included (Apache).
    async fn subrequest(
        &mut self,
        target: &[u8],
        page: &mut Page,
        ex: &mut Exchange<'_>,
    ) -> Result<(), String> {
        // A cached static file is written at once: no handler runs, so
        // nothing can see this page's variables.
        let routed = match self.inc.route(ex.req(), target) {
            Ok(resp) => return self.included(target, resp, ex),
            Err(r) => r,
        };
        {
            let mut sh = self.shared.borrow_mut();
            sh.set = page.vars().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
            if sh.base.is_none() {
                // A nested page runs in this (the outermost) page's
                // environment.
                sh.base = Some((self.env.base().clone(), self.times));
            }
        }
        // What came before the include reaches the client first when the
        // include has to wait (a CGI script, a slow upstream); one that
        // answers at once is written with it.
        let fut = self.inc.run(routed);
        let mut fut = std::pin::pin!(fut);
        let ready = std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match fut.as_mut().poll(cx) {
                std::task::Poll::Ready(r) => Some(r),
                std::task::Poll::Pending => None,
            })
        })
        .await;
        let resp = match ready {
            Some(r) => r,
            None => {
                if !ex.flush().await {
                    return Ok(());
                }
                fut.await
            }
        };
        // What a nested page `set` is seen here after it (Apache shares
        // one table).
        for (n, v) in &self.shared.borrow().set {
            page.set_var(n, v);
        }
        self.included(target, resp, ex)
    }

    /// Writes an include's body here; the body of an answer other than
    /// 200 is not included (Apache).
    fn included(
        &self,
        target: &[u8],
        resp: crate::exchange::SubResponse,
        ex: &mut Exchange<'_>,
    ) -> Result<(), String> {
        if resp.status != 200 {
            return Err(format!("status {}", resp.status));
        }
        if resp.cut {
            tracing::warn!(
                "ssi: {}: the include of {} was cut at {} bytes (max_include)",
                self.norm,
                String::from_utf8_lossy(target),
                self.cfg.max_include
            );
        }
        ex.write(&resp.body);
        Ok(())
    }

    /// `flastmod` and `fsize`: a stat beneath the root.
    fn stat(&self, src: &Source) -> Result<FileStat, String> {
        let target = self.target(src.clone());
        let path = target.split(|&b| b == b'?').next().unwrap_or(b"");
        let norm = crate::http::path::normalize(path).map_err(|e| format!("{e:?}"))?;
        let f = self
            .cfg
            .root
            .open_beneath(&norm, self.cfg.follow_symlinks)
            .map_err(|e| e.to_string())?;
        let m = f.metadata().map_err(|e| e.to_string())?;
        Ok(FileStat {
            size: m.size(),
            mtime: m.mtime(),
        })
    }

    /// `exec cmd`: `/bin/sh -c` in the page's directory with the page's
    /// variables, its output (up to `max_include`) written here; killed
    /// after `exec_timeout`.
    async fn exec_cmd(&mut self, command: &[u8], ex: &mut Exchange<'_>) -> Result<(), String> {
        if !ex.flush().await {
            return Ok(());
        }
        let rel = &self.norm[..self.norm.rfind('/').map_or(0, |i| i + 1)];
        let dir: PathBuf = self.cfg.root.path.join(rel.trim_start_matches('/'));
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(os_str(command)?)
            .current_dir(dir)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // Its own group, so a timeout kills what the shell started too.
            .process_group(0)
            .kill_on_drop(true);
        self.env.for_each_var(&mut |n, v| {
            if let (Ok(n), Ok(v)) = (os_str(n), os_str(v)) {
                cmd.env(n, v);
            }
        });
        let mut child = cmd.spawn().map_err(|e| e.to_string())?;
        let pid = child.id();
        let Some(mut out) = child.stdout.take() else {
            return Err("no stdout".into());
        };
        let max = self.cfg.max_include;
        let mut body = Vec::new();
        let read = async {
            let mut chunk = vec![0u8; 16 * 1024];
            loop {
                match out.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let room = max.saturating_sub(body.len());
                        body.extend_from_slice(&chunk[..n.min(room)]);
                        if n > room {
                            break;
                        }
                    }
                }
            }
            child.wait().await
        };
        let res = tokio::time::timeout(self.cfg.exec_timeout, read).await;
        if let Some(pid) = pid {
            // SAFETY: kill(2) on the group of a child we spawned with
            // process_group(0); a group already gone is ESRCH, harmless.
            unsafe {
                libc::kill(-(pid as i32), libc::SIGKILL);
            }
        }
        ex.write(&body);
        match res {
            Ok(Ok(st)) if st.success() => Ok(()),
            // Apache includes the output whatever the exit status.
            Ok(Ok(st)) => {
                tracing::warn!("ssi: {}: exec cmd exited with {st}", self.norm);
                Ok(())
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("timed out after {:?}", self.cfg.exec_timeout)),
        }
    }
}

/// Bytes as an OS string; a NUL byte (which no C string can carry) is
/// an error, not a panic in `Command`.
fn os_str(b: &[u8]) -> Result<&std::ffi::OsStr, String> {
    use std::os::unix::ffi::OsStrExt;
    if b.contains(&0) {
        return Err("a NUL byte in a command or variable".into());
    }
    Ok(std::ffi::OsStr::from_bytes(b))
}

/// The CGI variables of the request and mod_include's own.
fn page_vars(b: &BaseVars) -> VarList {
    let norm = b.norm.as_str();
    let filename = format!("{}{norm}", b.root);
    let meta = gateway::meta_env_of(
        &b.head,
        &b.info,
        Names {
            script_name: norm,
            path_info: "",
            document_root: &b.document_root,
            script_filename: &filename,
        },
        None,
        false,
    );
    let mut vars = VarList::new();
    vars.vars.reserve(meta.iter().count() + b.extra.len() + 6);
    for (n, v) in meta.iter() {
        vars.set(n.as_bytes(), v);
    }
    for (n, v) in &b.extra {
        vars.set(n.as_bytes(), v);
    }
    let name = norm.rsplit('/').next().unwrap_or("");
    vars.set(b"DOCUMENT_NAME", name.as_bytes());
    vars.set(b"DOCUMENT_URI", norm.as_bytes());
    vars.set(b"DOCUMENT_ARGS", b.head.query().unwrap_or(b""));
    // Only with a query, as mod_include: without one it is undefined
    // (`echo` prints "(none)"), where QUERY_STRING is empty.
    if let Some(query) = b.head.query() {
        vars.set(
            b"QUERY_STRING_UNESCAPED",
            &stoa_ssi::format::query_string_unescaped(query),
        );
    }
    vars.set(b"USER_NAME", user_name(b.uid).as_bytes());
    vars
}

thread_local! {
    /// Logins by uid: an NSS lookup reads /etc/passwd, too slow to do on
    /// every page. Renamed users show the old name until a restart.
    static USERS: RefCell<std::collections::HashMap<u32, String>> =
        RefCell::new(std::collections::HashMap::new());
}

/// The login of `uid`, or Apache's "<unknown>" (cached per worker).
fn user_name(uid: u32) -> String {
    if let Some(n) = USERS.with(|u| u.borrow().get(&uid).cloned()) {
        return n;
    }
    let n = lookup_user(uid);
    USERS.with(|u| {
        let mut u = u.borrow_mut();
        // Bounded: a site's files have few owners.
        if u.len() < 1024 {
            u.insert(uid, n.clone());
        }
    });
    n
}

fn lookup_user(uid: u32) -> String {
    let mut pw: libc::passwd = unsafe_zeroed_passwd();
    let mut buf = vec![0 as libc::c_char; 2048];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to live, properly sized storage owned here;
    // getpwuid_r writes only within `buf` (whose length we pass) and `pw`.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() || pw.pw_name.is_null() {
        return "<unknown>".to_owned();
    }
    // SAFETY: on success pw_name points to a NUL-terminated string in `buf`.
    unsafe { CStr::from_ptr(pw.pw_name) }
        .to_string_lossy()
        .into_owned()
}

fn unsafe_zeroed_passwd() -> libc::passwd {
    // SAFETY: passwd is a C struct of pointers and integers; all-zero
    // (null pointers) is a valid value that getpwuid_r overwrites.
    unsafe { std::mem::zeroed() }
}

/// The local zone at `t`, as `localtime_r` says (DATE_LOCAL).
fn local_zone(t: i64) -> Zone {
    let tt = t as libc::time_t;
    // SAFETY: tm is a C struct of integers and a pointer; all-zero is valid.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals.
    let ok = unsafe { !libc::localtime_r(&tt, &mut tm).is_null() };
    if !ok {
        return Zone::utc();
    }
    let name = if tm.tm_zone.is_null() {
        "UTC".to_owned()
    } else {
        // SAFETY: glibc points tm_zone at a static, NUL-terminated name.
        unsafe { CStr::from_ptr(tm.tm_zone) }
            .to_string_lossy()
            .into_owned()
    };
    Zone {
        offset: tm.tm_gmtoff as i32,
        name,
    }
}

// ---- configuration: `ssi = {...}` of a route ----

/// `ssi = {...}`: pages parsed for server-side includes.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsiRouteConfig {
    /// Allow `<!--#exec cgi/cmd -->` (default false: `IncludesNOEXEC`).
    #[serde(default)]
    pub exec: bool,
    /// Send the page's Last-Modified (Apache `XBitHack full`; default false).
    #[serde(default)]
    pub last_modified: bool,
    /// The starting `config errmsg` (`SSIErrorMsg`).
    pub errmsg: Option<String>,
    /// The starting `config timefmt` (`SSITimeFormat`).
    pub timefmt: Option<String>,
    /// The starting `config sizefmt`: "abbrev" (default) or "bytes".
    pub sizefmt: Option<String>,
    /// What `echo` prints for an undefined variable (`SSIUndefinedEcho`).
    pub echomsg: Option<String>,
    /// How long an `exec cmd` may run (default 10s).
    pub exec_timeout: Option<crate::units::Dur>,
    /// Body bytes kept from one include (default 16 MiB).
    pub max_include: Option<crate::units::Size>,
    /// The bound on one directive's length (default 8 KiB).
    pub max_directive: Option<crate::units::Size>,
}

impl super::configure::Configure for SsiRouteConfig {
    fn configure(
        &self,
        cx: &super::configure::Ctx<'_>,
    ) -> Result<super::Handler, super::configure::Fail> {
        use super::configure::Fail;
        let Some(root) = &cx.site.root else {
            return Err(Fail::new(
                "ssi",
                "parses files under the site's `root`, and the site has none",
            ));
        };
        let cfg = SsiConfig::new(
            root,
            SsiSpec {
                exec: self.exec,
                last_modified: self.last_modified,
                errmsg: self.errmsg.clone(),
                timefmt: self.timefmt.clone(),
                sizefmt: self.sizefmt.clone(),
                echomsg: self.echomsg.clone(),
                exec_timeout: self.exec_timeout.map(|d| d.0),
                max_include: self.max_include.map(|s| s.0),
                max_directive: self.max_directive.map(|s| s.0),
                follow_symlinks: cx.site.follow_symlinks,
                document_root: cx.site.document_root.clone(),
            },
        )
        .map_err(Fail::at("ssi"))?;
        Ok(super::Handler::Ssi(std::sync::Arc::new(cfg)))
    }
}
