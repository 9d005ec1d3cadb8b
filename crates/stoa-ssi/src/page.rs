//! The interpreter: one [`Page`] per document being served. It runs the
//! parser, keeps the conditional state, the variables and the `config`
//! settings, and tells the server what to do, one [`Action`] at a time.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;

use crate::expr::{self, Backrefs};
use crate::format::{self, Zone};
use crate::parser::{Arg, Directive, Event, Malformed, Parser, DEFAULT_MAX_DIRECTIVE};

/// Apache's default `SSIErrorMsg`.
pub const DEFAULT_ERRMSG: &[u8] = b"[an error occurred while processing this directive]";
/// Apache's default `SSIUndefinedEcho`.
pub const DEFAULT_ECHOMSG: &[u8] = b"(none)";

/// How `fsize` prints sizes (`config sizefmt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SizeFmt {
    /// `apr_strfsize`: `"1.2M"`.
    #[default]
    Abbrev,
    /// `1,234,567`.
    Bytes,
}

/// Per-site settings: the starting values of what `config` changes, and
/// the server's policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `SSIErrorMsg`.
    pub errmsg: Vec<u8>,
    /// `SSITimeFormat`.
    pub timefmt: Vec<u8>,
    /// `SSIUndefinedEcho`.
    pub echomsg: Vec<u8>,
    pub sizefmt: SizeFmt,
    /// The bound on one directive's length (see [`Parser::new`]).
    pub max_directive: usize,
    /// Whether `exec` may run (`Options +Includes`); off, `exec` prints
    /// the error message (`IncludesNOEXEC`).
    pub exec: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            errmsg: DEFAULT_ERRMSG.to_vec(),
            timefmt: format::DEFAULT_TIMEFMT.to_vec(),
            echomsg: DEFAULT_ECHOMSG.to_vec(),
            sizefmt: SizeFmt::Abbrev,
            max_directive: DEFAULT_MAX_DIRECTIVE,
            exec: false,
        }
    }
}

/// The moments behind `DATE_LOCAL`, `DATE_GMT` and `LAST_MODIFIED`, in
/// seconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Times {
    /// When the request arrived.
    pub request: i64,
    /// The document's modification time.
    pub last_modified: i64,
}

/// The variables the server defines, and what only it can know.
///
/// Names are compared without regard to ASCII case, like Apache's
/// `subprocess_env` table (`$document_uri` finds `DOCUMENT_URI`).
pub trait Env {
    /// A variable: the CGI variables, `DOCUMENT_NAME`, `DOCUMENT_URI`,
    /// `QUERY_STRING_UNESCAPED` ([`format::query_string_unescaped`]),
    /// `USER_NAME` (the document owner's login), ... `DATE_LOCAL`,
    /// `DATE_GMT` and `LAST_MODIFIED` come from [`Times`] and `timefmt`
    /// and are not asked for.
    fn var(&self, name: &[u8]) -> Option<Cow<'_, [u8]>>;

    /// Every variable, in order, for `printenv`. The default lists none.
    fn for_each_var(&self, f: &mut dyn FnMut(&[u8], &[u8])) {
        let _ = f;
    }

    /// The local time zone at `t` (what `localtime_r` says). Default UTC.
    fn zone(&self, t: i64) -> Zone {
        let _ = t;
        Zone::utc()
    }

    /// `<!--#if expr="-A /uri" -->`: whether a subrequest for `uri` would
    /// be allowed. `None` (the default) makes `-A` an error.
    fn access(&self, uri: &[u8]) -> Option<bool> {
        let _ = uri;
        None
    }
}

/// A simple [`Env`]: variables in a list, UTC.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VarList {
    pub vars: Vec<(Vec<u8>, Vec<u8>)>,
}

impl VarList {
    pub fn new() -> VarList {
        VarList::default()
    }

    /// Adds or replaces (in place) a variable.
    pub fn set(&mut self, name: &[u8], value: &[u8]) {
        match self
            .vars
            .iter_mut()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            Some(v) => v.1 = value.to_vec(),
            None => self.vars.push((name.to_vec(), value.to_vec())),
        }
    }
}

impl Env for VarList {
    fn var(&self, name: &[u8]) -> Option<Cow<'_, [u8]>> {
        self.vars
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| Cow::Borrowed(&v[..]))
    }

    fn for_each_var(&self, f: &mut dyn FnMut(&[u8], &[u8])) {
        for (n, v) in &self.vars {
            f(n, v);
        }
    }
}

/// Where an included or examined document is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A URL path (with its query string, if any), resolved through the
    /// server's routing like a request: `include virtual`.
    Virtual(Vec<u8>),
    /// A path relative to the current document's directory, already
    /// checked to stay below it (no absolute path, no `..` above it):
    /// `include file`.
    File(Vec<u8>),
}

/// What [`Action::FileInfo`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoKind {
    Flastmod,
    Fsize,
}

/// `exec cgi` or `exec cmd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecKind {
    /// Run the CGI script at this URL path and include its output.
    Cgi,
    /// Run this shell command (`/bin/sh -c`) and include its output.
    Cmd,
}

/// What the server learns about a file for `fsize` and `flastmod`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub size: u64,
    /// Seconds since the Unix epoch.
    pub mtime: i64,
}

/// What the server is to do next, in page order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<'a> {
    /// Page text: write it (borrowed from the input).
    Text(&'a [u8]),
    /// Text the page generated (`echo`, `fsize`, `printenv`, ...): write it.
    Output(Vec<u8>),
    /// Run this subrequest and write its output here. Report a failure
    /// with [`Page::failed`] before calling [`Page::next`] again (the
    /// `onerror` attribute depends on it); saying nothing means success.
    Include(Source),
    /// Look this file up and answer with [`Page::file_info`] or
    /// [`Page::failed`]; the page then prints the time or size.
    FileInfo { kind: InfoKind, source: Source },
    /// Only when [`Settings::exec`] allows it: run this and write its
    /// output here; report a failure with [`Page::failed`].
    Exec { kind: ExecKind, command: Vec<u8> },
    /// A directive failed: write `errmsg` (the page's current
    /// `config errmsg`) and log `reason`.
    Error { errmsg: Vec<u8>, reason: String },
    /// Log only (Apache's warnings, such as a missing `endif`).
    Warning(String),
}

/// The variables of a page: `set`, `$0`..`$9`, the dates.
#[derive(Debug)]
struct Vars {
    /// Set by `set`, in order (replaced in place, as Apache's table does).
    set: Vec<(Vec<u8>, Vec<u8>)>,
    backrefs: Backrefs,
    /// The starting `config` values, shared by every run of a page.
    settings: Arc<Settings>,
    /// `config timefmt`, once the page set it.
    timefmt: Option<Vec<u8>>,
    times: Times,
}

const DATE_VARS: [&[u8]; 3] = [b"DATE_LOCAL", b"DATE_GMT", b"LAST_MODIFIED"];

impl Vars {
    fn timefmt(&self) -> &[u8] {
        self.timefmt.as_deref().unwrap_or(&self.settings.timefmt)
    }

    fn date(&self, name: &[u8], env: &dyn Env) -> Option<Vec<u8>> {
        let (t, zone) = if name.eq_ignore_ascii_case(b"DATE_LOCAL") {
            (self.times.request, env.zone(self.times.request))
        } else if name.eq_ignore_ascii_case(b"DATE_GMT") {
            (self.times.request, Zone::gmt())
        } else if name.eq_ignore_ascii_case(b"LAST_MODIFIED") {
            (self.times.last_modified, env.zone(self.times.last_modified))
        } else {
            return None;
        };
        Some(format::strftime(self.timefmt(), t, &zone))
    }

    /// `get_include_var`: `$0`..`$9`, then `set` variables, the dates, and
    /// the server's.
    fn get<'e>(&self, name: &[u8], env: &'e dyn Env) -> Option<Cow<'e, [u8]>> {
        if let [d @ b'0'..=b'9'] = name {
            return self
                .backrefs
                .get(usize::from(d - b'0'))
                .map(|v| Cow::Owned(v.to_vec()));
        }
        if let Some((_, v)) = self.set.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            return Some(Cow::Owned(v.clone()));
        }
        if let Some(v) = self.date(name, env) {
            return Some(Cow::Owned(v));
        }
        env.var(name)
    }

    fn set(&mut self, name: &[u8], value: Vec<u8>) {
        match self
            .set
            .iter_mut()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            Some(v) => v.1 = value,
            None => self.set.push((name.to_vec(), value)),
        }
    }

    fn expand(&self, s: &[u8], leave_name: bool, env: &dyn Env) -> Vec<u8> {
        expr::expand(s, leave_name, &mut |n| {
            self.get(n, env).map(Cow::into_owned)
        })
    }
}

struct Scope<'a> {
    vars: &'a mut Vars,
    env: &'a dyn Env,
}

impl expr::Scope for Scope<'_> {
    fn var(&mut self, name: &[u8]) -> Option<Cow<'_, [u8]>> {
        self.vars.get(name, self.env)
    }
    fn set_backrefs(&mut self, b: Backrefs) {
        self.vars.backrefs = b;
    }
    fn access(&mut self, uri: &[u8]) -> Option<bool> {
        self.env.access(uri)
    }
}

/// A directive that needs the server's answers between its steps.
#[derive(Debug)]
struct Job {
    kind: JobKind,
    /// The directive's arguments (a template's own, not copied per run)
    /// and the next to take.
    args: Rc<[Arg]>,
    next: usize,
    /// `include`: the failure not yet recovered by an `onerror`.
    last_error: Option<String>,
    /// An action went out that expects a reply.
    waiting: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobKind {
    Include,
    FileInfo(InfoKind),
    Exec,
}

/// One document being processed.
///
/// ```text
/// let mut page = Page::new(settings, times);
/// for each chunk read from the document:
///     let mut input = &chunk[..];
///     while let Some(action) = page.next(&mut input, &env) { do it }
/// page.finish();
/// while let Some(action) = page.next(&mut &[][..], &env) { do it }
/// ```
///
/// Text is passed through as it arrives; only a directive (at most
/// [`Settings::max_directive`] bytes) is held across chunks.
#[derive(Debug)]
pub struct Page {
    parser: Parser,
    /// `config errmsg` and `echomsg`, once the page set them (otherwise
    /// `vars.settings`' own: a run copies no settings).
    errmsg: Option<Vec<u8>>,
    echomsg: Option<Vec<u8>>,
    sizefmt: SizeFmt,
    exec: bool,
    vars: Vars,
    /// mod_include's `SSI_FLAG_PRINTING`: output is on.
    printing: bool,
    /// `SSI_FLAG_COND_TRUE`: a branch of the current `if` was taken.
    cond_true: bool,
    /// `if`s opened while not printing, whose `endif` is not yet seen.
    /// With the two flags this is the whole conditional stack: an `if`
    /// is evaluated only while printing, i.e. inside a taken branch.
    nesting: usize,
    queue: VecDeque<Action<'static>>,
    job: Option<Job>,
    reply: Option<Result<FileStat, String>>,
}

impl Page {
    pub fn new(settings: Settings, times: Times) -> Page {
        Page::shared(Arc::new(settings), times)
    }

    /// [`Page::new`] with settings shared by many pages (a server's, per
    /// route), which are not copied.
    pub fn shared(settings: Arc<Settings>, times: Times) -> Page {
        Page {
            parser: Parser::new(settings.max_directive),
            errmsg: None,
            echomsg: None,
            sizefmt: settings.sizefmt,
            exec: settings.exec,
            vars: Vars {
                set: Vec::new(),
                backrefs: Backrefs::default(),
                settings,
                timefmt: None,
                times,
            },
            printing: true,
            cond_true: true,
            nesting: 0,
            queue: VecDeque::new(),
            job: None,
            reply: None,
        }
    }

    /// The variables `set` so far (for the environment of a subrequest or
    /// of a nested page: Apache shares them).
    pub fn vars(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.vars.set.iter().map(|(n, v)| (&n[..], &v[..]))
    }

    /// Sets a variable as `<!--#set -->` would (e.g. inherited from the
    /// including page).
    pub fn set_var(&mut self, name: &[u8], value: &[u8]) {
        self.vars.set(name, value.to_vec());
    }

    /// Whether output is on at this point of the page.
    pub fn printing(&self) -> bool {
        self.printing
    }

    /// How many bytes of directive text the parser holds.
    pub fn buffered(&self) -> usize {
        self.parser.buffered()
    }

    /// The answer to an [`Action::FileInfo`].
    pub fn file_info(&mut self, stat: FileStat) {
        self.reply = Some(Ok(stat));
    }

    /// The [`Action::Include`], [`Action::FileInfo`] or [`Action::Exec`]
    /// just returned failed; `reason` goes to the log.
    pub fn failed(&mut self, reason: impl Into<String>) {
        self.reply = Some(Err(reason.into()));
    }

    /// The next thing to do, parsing from the front of `input` (advanced
    /// past what was used); `None` when `input` is used up.
    pub fn next<'a>(&mut self, input: &mut &'a [u8], env: &dyn Env) -> Option<Action<'a>> {
        loop {
            if let Some(a) = self.queue.pop_front() {
                return Some(a);
            }
            if self.job.is_some() {
                self.step(env);
                continue;
            }
            match self.parser.next(input)? {
                Event::Text(t) => {
                    if self.printing {
                        return Some(Action::Text(t));
                    }
                }
                ev => self.event(ev, env),
            }
        }
    }

    /// [`Page::next`] over a page parsed once ([`Template`]): `pos` is
    /// where this run is in it (start at 0). When it returns `None` the
    /// page is done; call [`Page::finish_template`] and take what that
    /// queued with `next_in` again.
    pub fn next_in<'a>(
        &mut self,
        t: &'a Template,
        pos: &mut usize,
        env: &dyn Env,
    ) -> Option<Action<'a>> {
        loop {
            if let Some(a) = self.queue.pop_front() {
                return Some(a);
            }
            if self.job.is_some() {
                self.step(env);
                continue;
            }
            let ev = t.events.get(*pos)?;
            *pos += 1;
            match ev {
                Cached::Text(r) => {
                    if self.printing {
                        return Some(Action::Text(&t.bytes[r.clone()]));
                    }
                }
                Cached::Static(s) => {
                    if self.printing {
                        return Some(Action::Text(s));
                    }
                }
                Cached::Directive(name, args) => self.directive(name, args, env),
                Cached::Event(ev) => self.event(ev.clone(), env),
            }
        }
    }

    /// The end of a [`Template`]'s run: the parser's end was part of the
    /// template; what remains is the warning for a missing `endif`.
    pub fn finish_template(&mut self) {
        if !self.printing {
            self.queue
                .push_back(Action::Warning("missing closing endif directive".into()));
        }
    }

    /// The end of the document: queues what remains (a held `<!--`, the
    /// error for an unterminated directive, the warning for a missing
    /// `endif`), to be taken with [`Page::next`] on empty input.
    pub fn finish(&mut self) {
        if let Some(ev) = self.parser.finish() {
            match ev {
                Event::Text(t) => {
                    if self.printing {
                        self.queue.push_back(Action::Text(t));
                    }
                }
                ev => self.event(ev, &NoEnv),
            }
        }
        if !self.printing {
            self.queue
                .push_back(Action::Warning("missing closing endif directive".into()));
        }
    }

    fn error(&mut self, reason: String) {
        self.queue.push_back(Action::Error {
            errmsg: self
                .errmsg
                .as_deref()
                .unwrap_or(&self.vars.settings.errmsg)
                .to_vec(),
            reason,
        });
    }

    fn event(&mut self, ev: Event<'_>, env: &dyn Env) {
        match ev {
            Event::Text(_) => {}
            Event::Malformed { error, name } => {
                if self.printing {
                    let name = String::from_utf8_lossy(&name);
                    let reason = match error {
                        Malformed::MissingName => "missing directive name".to_owned(),
                        Malformed::MissingArgName => {
                            format!("missing argument name for value to tag {name}")
                        }
                        Malformed::TooLong => "directive longer than the limit".to_owned(),
                        Malformed::Unterminated => {
                            "SSI directive was not properly finished at the end of the document"
                                .to_owned()
                        }
                    };
                    self.error(reason);
                }
            }
            Event::Directive(d) => {
                let Directive { name, args } = d;
                self.directive(&name, &args.into(), env)
            }
        }
    }

    fn directive(&mut self, name: &[u8], args: &Rc<[Arg]>, env: &dyn Env) {
        match name {
            b"if" => return self.if_(args, env),
            b"elif" => return self.elif(args, env),
            b"else" => return self.else_(args),
            b"endif" => return self.endif(args),
            _ => {}
        }
        if !self.printing {
            return;
        }
        let argc = args.len();
        let n = || String::from_utf8_lossy(name);
        match name {
            b"comment" => {}
            b"echo" | b"config" | b"include" | b"fsize" | b"flastmod" | b"exec" if argc == 0 => {
                self.error(format!("missing argument for {} element", n()))
            }
            b"set" if argc < 2 => self.error("missing argument for set element".into()),
            b"printenv" if argc > 0 => self.error("printenv directive does not take tags".into()),
            b"echo" => self.echo(args, env),
            b"set" => self.set(args, env),
            b"config" => self.config(args, env),
            b"printenv" => self.printenv(env),
            b"include" => self.start(JobKind::Include, args.clone()),
            b"fsize" => self.start(JobKind::FileInfo(InfoKind::Fsize), args.clone()),
            b"flastmod" => self.start(JobKind::FileInfo(InfoKind::Flastmod), args.clone()),
            b"exec" if !self.exec => self.error("exec used but not allowed".into()),
            b"exec" => self.start(JobKind::Exec, args.clone()),
            _ => self.error(format!("unknown directive \"{}\"", n())),
        }
    }

    /// The `expr` of an `if`/`elif`, or the reason it has none.
    fn condition<'a>(args: &'a [Arg], what: &str) -> Result<&'a [u8], String> {
        let argc = args.len();
        let arg = match (argc, args.first()) {
            (1, Some(a)) => a,
            (0, _) => return Err(format!("missing expr argument for {what} element")),
            _ => return Err(format!("too many arguments for {what} element")),
        };
        if arg.name != b"expr" {
            return Err(format!(
                "unknown parameter \"{}\" to tag {what}",
                String::from_utf8_lossy(&arg.name)
            ));
        }
        arg.value
            .as_deref()
            .ok_or_else(|| format!("missing expr value for {what} element"))
    }

    fn eval(&mut self, expr: &[u8], env: &dyn Env) -> Result<bool, String> {
        let mut scope = Scope {
            vars: &mut self.vars,
            env,
        };
        expr::evaluate(expr, &mut scope)
    }

    fn if_(&mut self, args: &[Arg], env: &dyn Env) {
        if !self.printing {
            self.nesting += 1;
            return;
        }
        let expr = match Page::condition(args, "if") {
            Ok(e) => e,
            Err(reason) => return self.error(reason),
        };
        match self.eval(expr, env) {
            Ok(v) => {
                self.printing = v;
                self.cond_true = v;
                self.nesting = 0;
            }
            Err(reason) => self.error(reason),
        }
    }

    fn elif(&mut self, args: &[Arg], env: &dyn Env) {
        if self.nesting > 0 {
            return;
        }
        // Apache prints these errors even inside a branch not taken.
        let expr = match Page::condition(args, "elif") {
            Ok(e) => e,
            Err(reason) => return self.error(reason),
        };
        if self.cond_true {
            self.printing = false;
            return;
        }
        match self.eval(expr, env) {
            Ok(v) => {
                self.printing = v;
                self.cond_true = v;
            }
            Err(reason) => self.error(reason),
        }
    }

    fn else_(&mut self, args: &[Arg]) {
        if self.nesting > 0 {
            return;
        }
        if !args.is_empty() {
            if self.printing {
                self.error("else directive does not take tags".into());
            }
            return;
        }
        if self.cond_true {
            self.printing = false;
        } else {
            self.printing = true;
            self.cond_true = true;
        }
    }

    fn endif(&mut self, args: &[Arg]) {
        if self.nesting > 0 {
            self.nesting -= 1;
            return;
        }
        if !args.is_empty() {
            return self.error("endif directive does not take tags".into());
        }
        self.printing = true;
        self.cond_true = true;
    }

    /// Applies `decoding` then `encoding` lists (comma/space separated,
    /// any case) to `v`, as `echo` and `set` do; an unknown name is an
    /// error, and Apache still runs the other list after one.
    fn codings(&mut self, mut v: Vec<u8>, decoding: &[u8], encoding: &[u8]) -> Option<Vec<u8>> {
        let mut ok = true;
        let words = |s: &[u8]| -> Vec<Vec<u8>> {
            s.split(|c| matches!(c, b',' | b' ' | b'\t'))
                .filter(|w| !w.is_empty())
                .map(|w| w.to_ascii_lowercase())
                .collect()
        };
        for w in words(decoding) {
            v = match &w[..] {
                b"none" => v,
                b"url" => format::unescape_url(&v),
                b"urlencoded" => format::unescape_urlencoded(&v),
                b"entity" => format::decode_html(&v),
                b"base64" => format::base64_decode(&v),
                other => {
                    self.error(format!(
                        "unknown value \"{}\" to parameter \"decoding\"",
                        String::from_utf8_lossy(other)
                    ));
                    ok = false;
                    break;
                }
            };
        }
        for w in words(encoding) {
            v = match &w[..] {
                b"none" => v,
                b"url" => format::escape_uri(&v),
                b"urlencoded" => format::escape_urlencoded(&v),
                b"entity" => format::escape_html(&v),
                b"base64" => format::base64_encode(&v),
                other => {
                    self.error(format!(
                        "unknown value \"{}\" to parameter \"encoding\"",
                        String::from_utf8_lossy(other)
                    ));
                    ok = false;
                    break;
                }
            };
        }
        ok.then_some(v)
    }

    fn echo(&mut self, args: &[Arg], env: &dyn Env) {
        let mut encoding = b"entity".to_vec();
        let mut decoding = b"none".to_vec();
        for arg in args {
            let Some(value) = &arg.value else { break };
            let value = format::decode_html(value);
            match &arg.name[..] {
                b"var" => {
                    let name = self.vars.expand(&value, false, env);
                    let text = match self.vars.get(&name, env) {
                        Some(v) => {
                            let v = v.into_owned();
                            match self.codings(v, &decoding, &encoding) {
                                Some(v) => v,
                                None => break,
                            }
                        }
                        None => self
                            .echomsg
                            .as_deref()
                            .unwrap_or(&self.vars.settings.echomsg)
                            .to_vec(),
                    };
                    if !text.is_empty() {
                        self.queue.push_back(Action::Output(text));
                    }
                }
                b"decoding" => decoding = value,
                b"encoding" => encoding = value,
                other => {
                    let reason = format!(
                        "unknown parameter \"{}\" in tag echo",
                        String::from_utf8_lossy(other)
                    );
                    self.error(reason);
                    break;
                }
            }
        }
    }

    fn set(&mut self, args: &[Arg], env: &dyn Env) {
        let mut encoding = &b"none"[..];
        let mut decoding = &b"none"[..];
        let mut var: Option<Vec<u8>> = None;
        for arg in args {
            let Some(value) = &arg.value else { break };
            match &arg.name[..] {
                b"var" => var = Some(self.vars.expand(&format::decode_html(value), false, env)),
                b"decoding" => decoding = value,
                b"encoding" => encoding = value,
                b"value" => {
                    let Some(name) = var.clone() else {
                        self.error("variable must precede value in set directive".into());
                        break;
                    };
                    let v = self.vars.expand(value, false, env);
                    let Some(v) = self.codings(v, decoding, encoding) else {
                        break;
                    };
                    self.vars.set(&name, v);
                }
                _ => {
                    self.error("invalid tag for set directive".into());
                    break;
                }
            }
        }
    }

    fn config(&mut self, args: &[Arg], env: &dyn Env) {
        for arg in args {
            let Some(value) = &arg.value else { break };
            let v = self.vars.expand(value, false, env);
            match &arg.name[..] {
                b"errmsg" => self.errmsg = Some(v),
                b"echomsg" => self.echomsg = Some(v),
                b"timefmt" => {
                    self.vars.timefmt = Some(v);
                    // Apache stores the three dates anew here, over any
                    // `set` of them.
                    self.vars
                        .set
                        .retain(|(n, _)| !DATE_VARS.iter().any(|d| d.eq_ignore_ascii_case(n)));
                }
                b"sizefmt" => match &v[..] {
                    b"bytes" => self.sizefmt = SizeFmt::Bytes,
                    b"abbrev" => self.sizefmt = SizeFmt::Abbrev,
                    _ => {
                        let reason = format!(
                            "unknown value \"{}\" to parameter \"sizefmt\" of tag config",
                            String::from_utf8_lossy(&v)
                        );
                        self.error(reason);
                        break;
                    }
                },
                other => {
                    let reason = format!(
                        "unknown parameter \"{}\" to tag config",
                        String::from_utf8_lossy(other)
                    );
                    self.error(reason);
                    break;
                }
            }
        }
    }

    fn printenv(&mut self, env: &dyn Env) {
        let mut out = Vec::new();
        let mut listed: Vec<Vec<u8>> = Vec::new();
        let line = |out: &mut Vec<u8>, n: &[u8], v: &[u8]| {
            out.extend_from_slice(&format::escape_html(n));
            out.push(b'=');
            out.extend_from_slice(&format::escape_html(v));
            out.push(b'\n');
        };
        env.for_each_var(&mut |n, v| {
            let shown = match self
                .vars
                .set
                .iter()
                .find(|(s, _)| s.eq_ignore_ascii_case(n))
            {
                Some((_, s)) => Cow::Borrowed(&s[..]),
                None => match self.vars.date(n, env) {
                    Some(d) => Cow::Owned(d),
                    None => Cow::Borrowed(v),
                },
            };
            line(&mut out, n, &shown);
            listed.push(n.to_ascii_lowercase());
        });
        let is_listed =
            |listed: &[Vec<u8>], n: &[u8]| listed.iter().any(|l| l.eq_ignore_ascii_case(n));
        for d in DATE_VARS {
            if !is_listed(&listed, d)
                && !self.vars.set.iter().any(|(n, _)| n.eq_ignore_ascii_case(d))
            {
                if let Some(v) = self.vars.date(d, env) {
                    line(&mut out, d, &v);
                }
            }
        }
        for (n, v) in &self.vars.set {
            if !is_listed(&listed, n) {
                line(&mut out, n, v);
            }
        }
        if !out.is_empty() {
            self.queue.push_back(Action::Output(out));
        }
    }

    fn start(&mut self, kind: JobKind, args: Rc<[Arg]>) {
        self.job = Some(Job {
            kind,
            args,
            next: 0,
            last_error: None,
            waiting: false,
        });
    }

    /// Advances the current job by one action (or to its end).
    fn step(&mut self, env: &dyn Env) {
        let Some(mut job) = self.job.take() else {
            return;
        };
        if job.waiting {
            job.waiting = false;
            let reply = self.reply.take();
            match (job.kind, reply) {
                (JobKind::Include, Some(Err(reason))) => {
                    if job.last_error.is_some() {
                        // `onerror` failed too: give up (one errmsg).
                        return self.end_include(job);
                    }
                    job.last_error = Some(reason);
                }
                (JobKind::Include, _) => job.last_error = None,
                (JobKind::FileInfo(kind), Some(Ok(stat))) => {
                    let text = match kind {
                        InfoKind::Fsize => match self.sizefmt {
                            SizeFmt::Abbrev => format::strfsize(stat.size),
                            SizeFmt::Bytes => format::size_in_bytes(stat.size),
                        },
                        InfoKind::Flastmod => {
                            format::strftime(self.vars.timefmt(), stat.mtime, &env.zone(stat.mtime))
                        }
                    };
                    self.queue.push_back(Action::Output(text));
                }
                (JobKind::FileInfo(_), Some(Err(reason))) => return self.error(reason),
                (JobKind::FileInfo(_), None) => {
                    return self.error("no file information from the server".into())
                }
                (JobKind::Exec, Some(Err(reason))) => return self.error(reason),
                (JobKind::Exec, _) => {}
            }
        }
        self.reply = None;
        let args = job.args.clone();
        let Some(arg) = args.get(job.next) else {
            return self.end_include(job);
        };
        job.next += 1;
        let Some(value) = &arg.value else {
            return self.end_include(job);
        };
        // Most values hold no entity: no copy of them.
        let value: Cow<'_, [u8]> = if value.contains(&b'&') {
            Cow::Owned(format::decode_html(value))
        } else {
            Cow::Borrowed(value)
        };
        let name = &arg.name[..];
        let action = match (job.kind, name) {
            (JobKind::Include, b"file") => {
                match relative_path(&self.vars.expand(&value, false, env)) {
                    Some(p) => Action::Include(Source::File(p)),
                    None => {
                        let reason = format!(
                            "unable to include file \"{}\"",
                            String::from_utf8_lossy(&value)
                        );
                        if job.last_error.is_some() {
                            return self.end_include(job);
                        }
                        job.last_error = Some(reason);
                        self.job = Some(job);
                        return;
                    }
                }
            }
            (JobKind::Include, b"virtual") if job.last_error.is_none() => {
                Action::Include(Source::Virtual(self.vars.expand(&value, false, env)))
            }
            (JobKind::Include, b"onerror") if job.last_error.is_some() => {
                Action::Include(Source::Virtual(self.vars.expand(&value, false, env)))
            }
            (JobKind::Include, b"virtual" | b"onerror") => {
                // Skipped: a virtual after a failure, an onerror after a
                // success.
                self.job = Some(job);
                return;
            }
            (JobKind::FileInfo(kind), b"file") => {
                match relative_path(&self.vars.expand(&value, false, env)) {
                    Some(p) => Action::FileInfo {
                        kind,
                        source: Source::File(p),
                    },
                    None => {
                        return self.error(format!(
                            "unable to access file \"{}\"",
                            String::from_utf8_lossy(&value)
                        ))
                    }
                }
            }
            (JobKind::FileInfo(kind), b"virtual") => Action::FileInfo {
                kind,
                source: Source::Virtual(self.vars.expand(&value, false, env)),
            },
            (JobKind::Exec, b"cmd") => Action::Exec {
                kind: ExecKind::Cmd,
                command: self.vars.expand(&value, true, env),
            },
            (JobKind::Exec, b"cgi") => Action::Exec {
                kind: ExecKind::Cgi,
                command: self.vars.expand(&value, false, env),
            },
            (kind, other) => {
                let tag = match kind {
                    JobKind::Include => "include",
                    JobKind::FileInfo(InfoKind::Fsize) => "fsize",
                    JobKind::FileInfo(InfoKind::Flastmod) => "flastmod",
                    JobKind::Exec => "exec",
                };
                self.error(format!(
                    "unknown parameter \"{}\" to tag {tag}",
                    String::from_utf8_lossy(other)
                ));
                return self.end_include(job);
            }
        };
        self.queue.push_back(action);
        job.waiting = true;
        self.job = Some(job);
    }

    /// Ends a job; an `include` whose last failure was not recovered
    /// prints the error message once.
    fn end_include(&mut self, job: Job) {
        if let Some(reason) = job.last_error {
            self.error(reason);
        }
    }
}

/// The environment for events after the page ended (none needs one).
struct NoEnv;

impl Env for NoEnv {
    fn var(&self, _: &[u8]) -> Option<Cow<'_, [u8]>> {
        None
    }
}

/// `include file` and `fsize file`: a path relative to the document's
/// directory that stays below it (`apr_filepath_merge` with
/// `SECUREROOTTEST | NOTABSOLUTE`), normalized; `None` otherwise.
fn relative_path(p: &[u8]) -> Option<Vec<u8>> {
    if p.starts_with(b"/") || p.contains(&0) {
        return None;
    }
    let mut parts: Vec<&[u8]> = Vec::new();
    for seg in p.split(|&c| c == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        return None;
    }
    Some(parts.join(&b'/'))
}

/// One parser event of a [`Template`].
#[derive(Debug)]
enum Cached {
    /// Text of the page, as a range of its bytes.
    Text(std::ops::Range<usize>),
    /// Text the parser made (a held `<!--` at the end of the page).
    Static(Vec<u8>),
    /// A directive (name and arguments), evaluated on each run; the
    /// arguments are shared with the run's job, not copied.
    Directive(Vec<u8>, Rc<[Arg]>),
    /// A malformed directive.
    Event(Event<'static>),
}

/// A page parsed once and run many times ([`Page::next_in`]): its bytes
/// and the parser's events, text as ranges of the bytes. Parsing is the
/// same as [`Page::next`]'s (the same directive bound), so a run gives
/// the same actions; only evaluation (variables, conditions, includes)
/// is done per run. What a server keeps in a template cache.
#[derive(Debug)]
pub struct Template {
    bytes: Box<[u8]>,
    events: Vec<Cached>,
}

impl Template {
    /// Parses a whole page with directives of at most `max_directive`
    /// bytes (as [`Settings::max_directive`]).
    pub fn parse(bytes: Vec<u8>, max_directive: usize) -> Template {
        let bytes = bytes.into_boxed_slice();
        let mut events = Vec::new();
        let base = bytes.as_ptr() as usize;
        let range_of = |t: &[u8]| -> Option<std::ops::Range<usize>> {
            let at = (t.as_ptr() as usize).checked_sub(base)?;
            (at + t.len() <= bytes.len()).then_some(at..at + t.len())
        };
        let push = |ev: Event<'_>, events: &mut Vec<Cached>| match ev {
            Event::Text(t) => match range_of(t) {
                // Adjacent text (the parser may split it) is one range.
                Some(r) => match events.last_mut() {
                    Some(Cached::Text(prev)) if prev.end == r.start => prev.end = r.end,
                    _ => events.push(Cached::Text(r)),
                },
                None => events.push(Cached::Static(t.to_vec())),
            },
            Event::Directive(d) => events.push(Cached::Directive(d.name, d.args.into())),
            Event::Malformed { error, name } => {
                events.push(Cached::Event(Event::Malformed { error, name }))
            }
        };
        let mut parser = Parser::new(max_directive);
        let mut input = &bytes[..];
        while let Some(ev) = parser.next(&mut input) {
            push(ev, &mut events);
        }
        if let Some(ev) = parser.finish() {
            push(ev, &mut events);
        }
        Template { bytes, events }
    }

    /// The page's bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Roughly what it holds in memory (for a cache's bound).
    pub fn cost(&self) -> usize {
        self.bytes.len()
            + self.events.len() * std::mem::size_of::<Cached>()
            + self
                .events
                .iter()
                .map(|e| match e {
                    Cached::Static(s) => s.len(),
                    Cached::Directive(name, args) => {
                        name.len()
                            + args
                                .iter()
                                .map(|a| a.name.len() + a.value.as_ref().map_or(0, Vec::len) + 48)
                                .sum::<usize>()
                    }
                    _ => 0,
                })
                .sum::<usize>()
    }
}
