//! What a handler's configurator is given and gives back (h2o's
//! `h2o_configurator_t`): each handler module owns its route table (the
//! serde struct a `[[site.route]]` key holds), its validation into its
//! runtime type, and its documentation; it implements [`Configure`] on
//! the table. The loader (`config`) knows the handlers only through that
//! trait and the list of keys in `config::RouteConfig::handlers`.

use super::static_files::StaticConfig;
use super::Handler;
use crate::upstream::Protocol;
use std::path::{Path, PathBuf};

/// A route table of one handler (`static = {...}`, `cgi = {...}`...).
pub(crate) trait Configure {
    /// Validates the table into the route's handler.
    fn configure(&self, cx: &Ctx<'_>) -> Result<Handler, Fail>;

    /// On a `suffix` route, this handler runs the files it matches as
    /// programs: no route of the site serves them as files.
    fn runs_scripts(&self) -> bool {
        false
    }

    /// A marker ending a script's name wherever it is in a path
    /// (`split_path`, the PHP preset's `.php`): never served as a file.
    fn script_marker(&self) -> Option<&str> {
        None
    }

    /// A `suffix` route of this handler also takes `suffix/...` (the
    /// rest is PATH_INFO).
    fn splits_path(&self) -> bool {
        false
    }
}

/// What went wrong: the key under the route (`static.root`) and why. The
/// loader adds the file, the line of the handler's key, and the route.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) key: String,
    pub(crate) message: String,
}

impl Fail {
    pub(crate) fn new(key: impl Into<String>, message: impl Into<String>) -> Fail {
        Fail {
            key: key.into(),
            message: message.into(),
        }
    }

    /// A message about `key`, for `map_err`.
    pub(crate) fn at(key: &str) -> impl Fn(String) -> Fail + '_ {
        move |message| Fail::new(key, message)
    }
}

/// What a configurator may read of its route, its site and the server.
pub(crate) struct Ctx<'a> {
    /// The route's `prefix`, if it has one.
    pub(crate) prefix: Option<&'a str>,
    /// The route's `regex`, if it is a regex route (its captures reach
    /// a `redirect`).
    pub(crate) regex: Option<&'a regex::Regex>,
    /// The route's `request_buffering` (default true).
    pub(crate) request_buffering: bool,
    /// The route's `response_buffering` (proxy routes).
    pub(crate) response_buffering: Option<&'a crate::gateway::spool::ResponseBufferingConfig>,
    pub(crate) site: &'a SiteCtx,
    /// A path as written in the file, made absolute.
    pub(crate) resolve: &'a dyn Fn(&str) -> PathBuf,
    /// The index of the `[[pool]]` of this name, which must speak
    /// `protocol`.
    pub(crate) pool: &'a dyn Fn(&str, Protocol) -> Result<usize, String>,
    /// `[cgi]`.
    pub(crate) cgi: &'a super::cgi::Globals,
    /// `[lua.shared]`.
    pub(crate) lua_dicts: &'a super::lua::Dicts,
}

/// The site's keys handlers read.
pub(crate) struct SiteCtx {
    /// `root`, resolved.
    pub(crate) root: Option<PathBuf>,
    /// `root`, canonical, as CGI's DOCUMENT_ROOT.
    pub(crate) document_root: String,
    pub(crate) index: Vec<String>,
    pub(crate) autoindex: bool,
    pub(crate) follow_symlinks: bool,
    /// Names the site's script routes run: never served as files.
    pub(crate) scripts: Vec<String>,
}

impl SiteCtx {
    /// A static handler over `root` with the site's rules (symlinks,
    /// scripts); `strip`: the prefix an `alias` maps onto `root`.
    pub(crate) fn open_static(
        &self,
        root: &Path,
        index: Vec<String>,
        autoindex: bool,
        strip: Option<&str>,
    ) -> Result<StaticConfig, String> {
        Ok(StaticConfig::open(root, index, autoindex)?.with_rules(
            self.follow_symlinks,
            self.scripts.clone(),
            strip.map(str::to_owned),
        ))
    }
}
