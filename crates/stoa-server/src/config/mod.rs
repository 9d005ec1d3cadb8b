//! Configuration: `stoa.toml` -> [`FileConfig`] (serde, unknown keys are
//! errors) -> validated into an immutable [`Runtime`] that the workers share
//! and that a reload replaces whole.
//!
//! Every error names the file, the line and the key. Relative paths in a
//! file are taken relative to the directory holding that file.

use crate::handler::configure::{self, Configure};
use crate::handler::{self, Handler};
pub use crate::http::path::{ends_with_ignore_case, split_at};
pub use crate::local::AccessLog;
use crate::log::access::{Dest, Format};
pub use crate::proto::{Http2Limits, Limits};
pub use crate::units::{Dur, Size};
pub use crate::upstream::pool::parse_addr;
use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use toml::Spanned;
pub use wire::{ProxyProtocol, UnixListen};

pub(crate) mod edge;
mod reach;
mod wire;

pub(crate) use crate::access::Access;

pub mod files;
pub use files::{Files, Recorded};

/// A configuration or start-up error, for people: `file:line: key: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub line: Option<usize>,
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// The file as written. Field docs are the reference for docs/CONFIG.md.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Addresses to listen on.
    #[serde(default)]
    pub listen: Vec<Spanned<String>>,
    /// Worker threads; 0 = one per core.
    #[serde(default)]
    pub workers: Option<usize>,
    /// Started as root: the account to run as once listeners are bound.
    pub user: Option<Spanned<String>>,
    #[serde(default)]
    pub log: LogConfig,
    #[serde(default)]
    pub limits: LimitsConfig,
    #[serde(default)]
    pub cache: CacheConfig,
    /// `[[cache_zone]]`: stores of the response cache (`crate::cache`),
    /// named by routes' `cache = { zone = ... }`.
    #[serde(default)]
    pub(crate) cache_zone: Vec<Spanned<crate::cache::config::ZoneTable>>,
    /// `[http2]`: limits of HTTP/2 connections.
    #[serde(default)]
    pub http2: Http2Config,
    /// `[http3]`: limits of HTTP/3 (QUIC) connections, on the `[[tls]]`
    /// blocks whose `protocols` name "h3".
    #[serde(default)]
    pub http3: Http3Config,
    #[serde(default)]
    pub cgi: CgiGlobalConfig,
    #[serde(default)]
    pub pool: Vec<Spanned<PoolConfig>>,
    #[serde(default)]
    pub site: Vec<SiteConfig>,
    /// `[[tls]]`: addresses that speak TLS, each block one certificate.
    #[serde(default)]
    pub tls: Vec<Spanned<TlsConfig>>,
    /// `[lua]`: what every Lua script of the server shares.
    #[serde(default)]
    pub lua: LuaGlobalConfig,
    /// `[proxy_protocol]`: listeners that expect a PROXY protocol header.
    #[serde(default)]
    pub proxy_protocol: wire::ProxyProtocolConfig,
    /// `[unix_socket]`: mode and owner of `unix:` listeners' files.
    #[serde(default)]
    pub unix_socket: wire::UnixSocketConfig,
}

/// `[lua]`: settings of the whole server's Lua scripts (docs/LUA.md).
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LuaGlobalConfig {
    /// `[lua.shared]`: dictionaries shared by every worker, by name, each
    /// with its size bound (`counters = "1 MiB"`): `stoa.shared.counters`.
    #[serde(default)]
    pub shared: std::collections::BTreeMap<String, Size>,
}

/// `[[tls]]`: a certificate and the addresses and names it serves.
/// Several blocks on one address: the client's SNI name picks the block
/// whose `hosts` list it; the first block answers every other name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// Addresses to accept TLS connections on.
    pub listen: Vec<String>,
    /// The certificate chain, PEM, leaf first (not with `acme`).
    #[serde(default)]
    pub cert: String,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1) (not with `acme`).
    #[serde(default)]
    pub key: String,
    /// SNI names this certificate serves (`*.example.com` allowed).
    #[serde(default)]
    pub hosts: Vec<String>,
    /// ALPN protocols in order of preference: "h2", "http/1.1"; "h3"
    /// also serves HTTP/3 over QUIC on the same addresses (UDP).
    pub protocols: Option<Vec<String>>,
    /// When `cert` or `key` is missing, write a self-signed certificate
    /// there (for `hosts`, else localhost) at start-up, as `stoa cert`.
    #[serde(default)]
    pub self_signed: bool,
    /// Files of session ticket keys (80 or 48 bytes each, nginx
    /// `ssl_session_ticket_key`): the first seals tickets, all open them.
    /// Several instances given the same files resume each other's
    /// sessions. Empty: a key of the process's own, rotated every 6 hours.
    #[serde(default)]
    pub session_ticket_keys: Vec<String>,
    /// Staple OCSP answers for the certificate (nginx `ssl_stapling`),
    /// asking the responder its authorityInfoAccess names.
    #[serde(default)]
    pub ocsp_stapling: bool,
    /// An `http://` OCSP responder to ask instead (nginx
    /// `ssl_stapling_responder`).
    pub ocsp_responder: Option<String>,
    /// A directory where good OCSP answers are kept across restarts,
    /// written by the server process (as `user`).
    pub ocsp_cache: Option<String>,
    /// Client certificates: `{ ca, required, crl }` (nginx
    /// `ssl_verify_client` + `ssl_client_certificate` + `ssl_crl`).
    pub client_auth: Option<crate::proto::tls::client::ClientAuthConfig>,
    /// Certificates for `hosts` from an ACME directory (crate::acme),
    /// instead of `cert` and `key`.
    pub acme: Option<crate::acme::AcmeTable>,
}

/// `[cgi]`: limits shared by every CGI route.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CgiGlobalConfig {
    /// Most CGI processes running at once, across workers.
    pub max_processes: Option<usize>,
    /// Requests that may wait for a process slot; more get 503.
    pub queue: Option<usize>,
    /// How long a request may wait for a slot before 503.
    pub queue_timeout: Option<Dur>,
    /// Variables of Stoa's own environment passed to scripts.
    pub pass_env: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// Access log: a path, "-" for stdout, or "off".
    pub access: Option<Spanned<String>>,
    /// Access log lines: "combined" (default), "json", or a template of
    /// `$variables` (nginx `log_format`).
    pub format: Option<Spanned<String>>,
    /// Error log: a path (default: stderr).
    pub error: Option<Spanned<String>>,
    /// Error log lines: "plain" (default) or "json".
    pub error_format: Option<Spanned<String>>,
}

/// A route's `access_log`: `false` (none), `true` (the server's), or a
/// file of its own.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RouteLogConfig {
    On(bool),
    File(String),
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub header_timeout: Option<Dur>,
    pub keepalive_timeout: Option<Dur>,
    pub send_timeout: Option<Dur>,
    pub body_timeout: Option<Dur>,
    pub body_min_rate: Option<Size>,
    pub shutdown_timeout: Option<Dur>,
    pub max_header_bytes: Option<Size>,
    pub max_uri_bytes: Option<Size>,
    pub max_body_bytes: Option<Size>,
    pub max_connections: Option<usize>,
}

/// `[http2]`: every key defaults to [`Http2Limits::default`].
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Http2Config {
    pub max_concurrent_streams: Option<u32>,
    pub initial_window_size: Option<Size>,
    pub initial_connection_window_size: Option<Size>,
    pub max_frame_size: Option<Size>,
    pub max_header_list_size: Option<Size>,
    pub max_send_buffer: Option<Size>,
    pub max_pending_accept_reset_streams: Option<usize>,
    pub max_local_error_reset_streams: Option<usize>,
    pub max_control_frames: Option<u32>,
}

/// `[http3]`: every key defaults to [`Http3Limits::default`].
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Http3Config {
    pub max_concurrent_streams: Option<u32>,
    pub max_field_section_size: Option<Size>,
    pub idle_timeout: Option<Dur>,
    pub max_handshakes: Option<usize>,
    pub max_datagram_size: Option<u16>,
    pub retry: Option<String>,
    pub early_data: Option<bool>,
    pub qpack_max_table_capacity: Option<Size>,
    pub qpack_blocked_streams: Option<u64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Files up to this size are kept in memory.
    pub max_file_bytes: Option<Size>,
    /// Memory for cached files, per worker.
    pub max_bytes: Option<Size>,
    /// How long a file's stat is trusted before it is checked again.
    pub revalidate: Option<Dur>,
}

edge::edge_keys! {
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SiteConfig {
    #[serde(default)]
    pub hosts: Option<Vec<String>>,
    pub root: Option<Spanned<String>>,
    pub index: Option<Vec<String>>,
    #[serde(default)]
    pub autoindex: bool,
    /// Follow symlinks that lead out of the root (default: refused, logged).
    #[serde(default)]
    pub follow_symlinks: bool,
    /// Serve paths with a segment starting with '.' (`.git`, `.env`,
    /// `.htaccess`); `/.well-known/` is always served.
    #[serde(default)]
    pub allow_dotfiles: bool,
    /// Cleartext requests get 308 to the same URL over https (ACME
    /// challenges excepted).
    #[serde(default)]
    pub https_redirect: bool,
    /// `Strict-Transport-Security` on responses sent over TLS.
    pub hsts: Option<Spanned<String>>,
    #[serde(default)]
    pub route: Vec<RouteConfig>,
    /// Regular-expression rewrites of the path, in order, before routing.
    #[serde(default)]
    pub rewrite: Vec<Spanned<RewriteConfig>>,
}
}

/// `[[site.rewrite]]`: `from` is matched against the decoded, normalized
/// path; `to` may use `$1`..`$9` and carry a query, to which the request's
/// own query is appended.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewriteConfig {
    pub from: String,
    pub to: String,
}

edge::edge_keys! {
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    pub prefix: Option<String>,
    pub suffix: Option<String>,
    /// A regular expression searched in the path (`(?i)` for any case).
    pub regex: Option<Spanned<String>>,
    // The handlers' keys: each table is its handler's (handler/*), and
    // `handlers` below lists them.
    #[serde(rename = "static")]
    pub static_: Option<Spanned<handler::static_files::StaticRouteConfig>>,
    pub cgi: Option<Spanned<handler::cgi::CgiRouteConfig>>,
    pub fastcgi: Option<Spanned<handler::fastcgi::FastCgiRouteConfig>>,
    /// A reverse proxy to an HTTP `[[pool]]`.
    pub proxy: Option<Spanned<handler::proxy::ProxyRouteConfig>>,
    /// A `[[pool]]` whose application is asked first (FastCGI Authorizer).
    pub authorizer: Option<Spanned<String>>,
    /// The status page.
    pub status: Option<Spanned<handler::status::StatusRouteConfig>>,
    /// The PHP preset.
    pub php: Option<Spanned<handler::php::PhpRouteConfig>>,
    /// Server-side includes (Apache mod_include syntax).
    pub ssi: Option<Spanned<handler::ssi::SsiRouteConfig>>,
    /// An embedded Lua handler (with `script`), or a Lua access check
    /// (with `access`).
    pub lua: Option<Spanned<handler::lua::LuaRouteConfig>>,
    /// A redirect built from a template.
    pub redirect: Option<Spanned<handler::redirect::RedirectRouteConfig>>,
    /// A fixed answer.
    pub respond: Option<Spanned<handler::respond::RespondRouteConfig>>,
    /// 403 for everything the matcher takes.
    #[serde(default)]
    pub deny: bool,
    /// Static files from this directory, the part of the path after the
    /// prefix mapped into it (nginx `alias`).
    pub alias: Option<Spanned<handler::static_files::Alias>>,
    /// Files tried in order (`$uri`, `$uri/`, `$query_string`); the last
    /// entry is a URI run through routing or `=CODE`.
    pub try_files: Option<Vec<String>>,
    /// Read request bodies before an application is taken (default true).
    pub request_buffering: Option<bool>,
    /// Take a proxied response in as fast as it comes, freeing the
    /// application from a slow client (default false).
    pub response_buffering: Option<crate::gateway::spool::ResponseBufferingConfig>,
    /// `false`: no access-log line for this route; a path: its lines go
    /// there instead (in the server's `[log] format`).
    pub access_log: Option<RouteLogConfig>,
}
}

/// A handler key of a route: its name, and when the route has it, the
/// span of its value and its configurator.
type HandlerKey<'a> = (
    &'static str,
    Option<(Option<std::ops::Range<usize>>, &'a dyn Configure)>,
);

impl RouteConfig {
    /// Every handler's key, and whether this route has it: the one list
    /// of handlers the loader has (a new handler is a line here and its
    /// key above), in the order `no handler` names them.
    fn handlers(&self) -> [HandlerKey<'_>; 12] {
        fn key<'a, T: Configure>(name: &'static str, v: Option<&'a Spanned<T>>) -> HandlerKey<'a> {
            (
                name,
                v.map(|v| (Some(v.span()), v.get_ref() as &dyn Configure)),
            )
        }
        [
            key("static", self.static_.as_ref()),
            key("alias", self.alias.as_ref()),
            key("cgi", self.cgi.as_ref()),
            key("fastcgi", self.fastcgi.as_ref()),
            key("proxy", self.proxy.as_ref()),
            key("php", self.php.as_ref()),
            key("ssi", self.ssi.as_ref()),
            // Without a script, `lua` is an access check only.
            key(
                "lua",
                self.lua.as_ref().filter(|l| l.get_ref().script.is_some()),
            ),
            key("status", self.status.as_ref()),
            key("redirect", self.redirect.as_ref()),
            key("respond", self.respond.as_ref()),
            (
                "deny",
                self.deny
                    .then_some((None, &handler::Deny as &dyn Configure)),
            ),
        ]
    }
}

/// `health = {...}` of an HTTP pool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    pub path: String,
    pub interval: Option<Dur>,
    pub timeout: Option<Dur>,
    pub fails: Option<u32>,
    pub passes: Option<u32>,
}

/// `[[pool]]`: a FastCGI application pool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    pub name: String,
    pub command: Option<Vec<String>>,
    pub address: Option<Vec<String>>,
    pub processes: Option<usize>,
    pub min_processes: Option<usize>,
    pub max_processes: Option<usize>,
    pub max_requests: Option<u64>,
    pub affinity: Option<String>,
    pub balance: Option<String>,
    pub queue: Option<usize>,
    pub queue_timeout: Option<Dur>,
    pub timeout: Option<Dur>,
    pub idle_timeout: Option<Dur>,
    pub capacity: Option<usize>,
    pub keepalive_timeout: Option<Dur>,
    /// Spawned processes run as this user (Stoa must keep root for it).
    pub user: Option<String>,
    /// "fastcgi" (default) or "http".
    pub protocol: Option<String>,
    /// Active health checks (HTTP pools).
    pub health: Option<HealthConfig>,
    /// TLS to the servers (HTTP pools; `https://` addresses imply it).
    pub tls: Option<crate::upstream::tls::TlsKey>,
    /// Spawned processes also get their socket as fd 3 with LISTEN_FDS=1.
    #[serde(default)]
    pub socket_activation: bool,
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

/// Where access log lines go.

#[derive(Debug, Clone)]
pub struct Cache {
    pub max_file_bytes: u64,
    pub max_bytes: u64,
    pub revalidate: Duration,
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            // Above 64 KiB, sendfile from a kept descriptor beats a writev
            // from memory: on 73.5 KiB files 23.2-24.7 against 28.5-29.9 µs
            // of server CPU per request (issue 16, BENCHMARKS.md): the copy
            // into the socket costs more than the extra syscalls.
            max_file_bytes: 64 * 1024,
            max_bytes: 64 << 20,
            revalidate: Duration::from_secs(1),
        }
    }
}

/// How a site is chosen by the request's Host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    Any,
    Exact(String),
    /// `*.example.com`: the suffix including the dot.
    Suffix(String),
}

impl HostPattern {
    fn parse(s: &str) -> HostPattern {
        let s = s.to_ascii_lowercase();
        if s == "*" {
            HostPattern::Any
        } else if let Some(rest) = s.strip_prefix('*') {
            HostPattern::Suffix(rest.to_owned())
        } else {
            HostPattern::Exact(s)
        }
    }

    /// Host names compare case-insensitively (RFC 3986 §3.2.2); patterns
    /// are stored lowercase.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Any => true,
            HostPattern::Exact(h) => h.eq_ignore_ascii_case(host),
            HostPattern::Suffix(s) => {
                host.len() > s.len()
                    && host.is_char_boundary(host.len() - s.len())
                    && host[host.len() - s.len()..].eq_ignore_ascii_case(s)
            }
        }
    }
}

#[derive(Debug, Clone)]
pub enum Matcher {
    Prefix(String),
    /// Matched case-insensitively (a case-insensitive file system view must
    /// not turn `/X.PHP` into source). With `split`, `suffix/` anywhere in
    /// the path matches too (`/x.php/extra`).
    Suffix {
        suffix: String,
        split: bool,
    },
    /// Searched in the path (`regex` crate syntax; `(?i)` for any case).
    Regex(regex::Regex),
}

impl Matcher {
    pub fn matches(&self, path: &str) -> bool {
        match self {
            Matcher::Prefix(p) => path.starts_with(p.as_str()),
            Matcher::Suffix { suffix, split } => {
                ends_with_ignore_case(path, suffix) || (*split && split_at(path, suffix).is_some())
            }
            Matcher::Regex(re) => re.is_match(path),
        }
    }

    /// The matcher as `stoa check`'s reachability analysis sees it.
    fn pattern(&self) -> reach::Pattern<'_> {
        match self {
            Matcher::Prefix(p) => reach::Pattern::Prefix(p),
            Matcher::Suffix { suffix, split } => reach::Pattern::Suffix {
                suffix,
                split: *split,
            },
            Matcher::Regex(re) => reach::Pattern::Regex(re.as_str()),
        }
    }
}

#[derive(Debug)]
pub struct Route {
    pub matcher: Matcher,
    pub(crate) handler: Handler,
    /// `try_files`, as written.
    pub try_files: Option<Vec<String>>,
    /// The access phase: checks asked before the handler (edge.rs).
    pub(crate) access: Access,
    /// What the exchange, response filters and handlers read of this
    /// route (its keys, else its site's).
    pub(crate) edge: crate::exchange::Edge,
}

/// `[[site.rewrite]]`, compiled.
#[derive(Debug)]
pub struct Rewrite {
    pub from: regex::Regex,
    pub to: String,
}

#[derive(Debug)]
pub struct Site {
    pub hosts: Vec<HostPattern>,
    /// Routes in the order they are tried: deny routes, then suffixes in
    /// file order, then prefixes, longest first.
    pub routes: Vec<Route>,
    /// The site's own static handler, used when no route matches.
    pub(crate) fallback: Option<Handler>,
    /// The site's root, where `try_files` and index names are looked up.
    pub root: Option<PathBuf>,
    pub index: Vec<String>,
    pub rewrites: Vec<Rewrite>,
    pub allow_dotfiles: bool,
    /// Cleartext requests are redirected to https (308).
    pub https_redirect: bool,
    /// The `Strict-Transport-Security` value for responses over TLS.
    pub hsts: Option<Vec<u8>>,
    /// The access phase of requests no route takes (the root's).
    pub(crate) access: Access,
    /// The [`Route::edge`] of requests no route takes.
    pub(crate) edge: crate::exchange::Edge,
}

/// Everything the workers need, validated and precompiled. Immutable: a
/// reload builds a new one and connections keep the one they started with.
#[derive(Debug)]
pub struct Runtime {
    pub listen: Vec<SocketAddr>,
    /// `unix:` entries of `listen`: Unix-domain listeners (restart only).
    pub unix: UnixListen,
    /// `[proxy_protocol]`.
    pub proxy_protocol: ProxyProtocol,
    /// TLS addresses, each with its certificates (a `[[tls]]` block's
    /// addresses; several blocks may share one).
    pub tls: Vec<(SocketAddr, Arc<crate::proto::tls::Acceptor>)>,
    /// The `[[tls]]` blocks with `acme`, checked.
    pub(crate) acme: Vec<crate::acme::Spec>,
    pub workers: usize,
    /// `user`: whom to run as when started as root (checked to exist).
    pub user: Option<String>,
    pub access_log: AccessLog,
    /// `[log] error`: the error log's file (None: stderr), and whether its
    /// lines are JSON.
    pub error_log: Option<PathBuf>,
    pub error_json: bool,
    pub limits: Limits,
    /// The largest request body any route or site allows (`[limits]
    /// max_body_bytes` or a larger `max_body_bytes` of a site or route):
    /// a longer `Content-Length` is refused before routing.
    pub max_body_ceiling: u64,
    pub cache: Cache,
    /// `[http2]`.
    pub http2: Http2Limits,
    /// `[http3]`.
    pub http3: Http3Limits,
    /// The QUIC config of each TLS address whose blocks name "h3".
    pub(crate) h3: Vec<(SocketAddr, Arc<quinn::ServerConfig>)>,
    pub sites: Vec<Site>,
    /// Some site has `https_redirect` or `hsts`: requests look their
    /// site up before routing (otherwise they need not).
    pub transport_rules: bool,
    /// The port `https_redirect` sends clients to: the first TLS
    /// listener's, or none (443) when one listens on 443 or none is
    /// configured (TLS terminated in front of Stoa).
    pub https_port: Option<u16>,
    /// FastCGI pools as configured; `pools` holds the running ones, in the
    /// same order, once the server has attached them (not in `stoa check`).
    pub pool_specs: Vec<crate::upstream::pool::PoolSpec>,
    pub pools: Vec<Arc<crate::upstream::pool::Pool>>,
    /// Where the runtime came from, for messages.
    pub source: String,
    /// What `stoa check` and start-up report without refusing the file
    /// (shadowed routes).
    pub warnings: Vec<String>,
    /// This runtime, once shared ([`Runtime::into_shared`]): work that
    /// outlives the request that started it (a cache fill) holds it.
    me: std::sync::Weak<Runtime>,
}

impl Runtime {
    /// The runtime shared by the workers, knowing its own `Arc`.
    pub fn into_shared(self) -> Arc<Runtime> {
        let mut rt = self;
        Arc::new_cyclic(|me| {
            rt.me = me.clone();
            rt
        })
    }

    /// This runtime's `Arc`, if it was made by [`Runtime::into_shared`].
    pub(crate) fn shared(&self) -> Option<Arc<Runtime>> {
        self.me.upgrade()
    }
}

impl Runtime {
    /// The site for a Host header value (port removed, case folded by the
    /// caller), or the first site.
    #[inline]
    pub fn site_for(&self, host: &str) -> Option<&Site> {
        self.sites
            .iter()
            .find(|s| s.hosts.iter().any(|h| h.matches(host)))
            .or_else(|| self.sites.first())
    }
}

/// Values given on the command line, which win over the file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub root: Option<PathBuf>,
    pub listen: Vec<String>,
    pub workers: Option<usize>,
    pub access_log: Option<String>,
    /// `--tls-cert`/`--tls-key`: the `--listen` addresses speak TLS
    /// (replacing the file's `listen` and `[[tls]]`).
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Only checking (`stoa check`): nothing is written (a `self_signed`
    /// certificate is made in a temporary directory and removed).
    pub dry_run: bool,
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Reads and validates a config file, reading it, its certificates and
/// keys through `files`.
pub fn load_with(
    path: &Path,
    overrides: &Overrides,
    files: &Files,
) -> Result<Runtime, ConfigError> {
    let file = path.display().to_string();
    let cannot = |message: String| ConfigError {
        file: file.clone(),
        line: None,
        key: String::new(),
        message,
    };
    let bytes = files
        .read(path)
        .map_err(|e| cannot(format!("cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| cannot("not UTF-8".to_owned()))?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let base = if base.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        base
    };
    // Absolute, so that paths stay right for processes that run elsewhere
    // (a pool's command runs in this directory).
    let base = files.canonicalize(&base).unwrap_or(base);
    from_str_with(&text, &file, &base, overrides, files)
}

/// The word a pool's `command` may start with to run the `stoa` binary
/// that reads the config (`command = ["{stoa}", "demo-app", "comments"]`).
const STOA_EXE: &str = "{stoa}";

/// Replaces a leading `{stoa}` in a pool's command with the path of the
/// running binary, so a config can run applications built into Stoa
/// without knowing where cargo or an installer put it.
fn expand_stoa(mut command: Vec<String>) -> Result<Vec<String>, String> {
    if command.first().is_some_and(|p| p == STOA_EXE) {
        // Resolved once: a binary rebuilt in place while Stoa runs shows as
        // "PATH (deleted)" in /proc/self/exe, which would turn a reload
        // into a changed pool spec (and a restart) with a wrong path.
        static EXE: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
        let exe = EXE.get_or_init(|| {
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .map_err(|e| format!("`{STOA_EXE}`: cannot find the running binary: {e}"))
        });
        command[0] = exe.clone()?;
    }
    Ok(command)
}

/// Parses and validates config text; `base` resolves relative paths.
/// Pure but for the files it names (roots, certificates): what tests of
/// configuration and routing start from.
#[cfg(test)]
pub fn from_str(
    text: &str,
    file: &str,
    base: &Path,
    overrides: &Overrides,
) -> Result<Runtime, ConfigError> {
    from_str_with(text, file, base, overrides, &Files::disk())
}

fn from_str_with(
    text: &str,
    file: &str,
    base: &Path,
    overrides: &Overrides,
    files: &Files,
) -> Result<Runtime, ConfigError> {
    let parsed: FileConfig = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        // toml's message names the key for unknown fields and type errors;
        // keep only its first line (the rest is a source excerpt).
        let message = e.message().lines().next().unwrap_or("invalid").to_owned();
        ConfigError {
            file: file.to_owned(),
            line,
            key: String::new(),
            message,
        }
    })?;
    build(parsed, text, file, base, overrides, files)
}

/// A runtime for `stoa serve DIR` without a config file, reading
/// `--tls-cert`/`--tls-key` through `files`.
pub fn for_dir_with(overrides: &Overrides, files: &Files) -> Result<Runtime, ConfigError> {
    build(
        FileConfig::default(),
        "",
        "(command line)",
        Path::new("."),
        overrides,
        files,
    )
}

fn build(
    fc: FileConfig,
    text: &str,
    file: &str,
    base: &Path,
    ov: &Overrides,
    files: &Files,
) -> Result<Runtime, ConfigError> {
    let err = |span: Option<std::ops::Range<usize>>, key: &str, message: String| ConfigError {
        file: file.to_owned(),
        line: span.map(|s| line_of(text, s.start)),
        key: key.to_owned(),
        message,
    };
    let resolve = |p: &str| -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        }
    };

    let mut listen = Vec::new();
    let mut unix_paths = Vec::new();
    let entries: Vec<(Option<std::ops::Range<usize>>, &str, &str)> = if ov.listen.is_empty() {
        fc.listen
            .iter()
            .map(|l| (Some(l.span()), l.get_ref().as_str(), "listen"))
            .collect()
    } else {
        ov.listen
            .iter()
            .map(|l| (None, l.as_str(), "--listen"))
            .collect()
    };
    for (span, l, key) in entries {
        match wire::parse_listen(l, &resolve).map_err(|m| err(span.clone(), key, m))? {
            wire::Listen::Tcp(a) => listen.push(a),
            wire::Listen::Unix(p) if unix_paths.contains(&p) => {
                return Err(err(span, key, format!("`{l}` is listed twice")))
            }
            wire::Listen::Unix(p) => unix_paths.push(p),
        }
    }
    if ov.tls_cert.is_some() && !unix_paths.is_empty() {
        // Never serve in the clear what was asked for over TLS.
        return Err(err(
            None,
            "--listen",
            "`unix:` listeners do not speak TLS (--tls-cert)".into(),
        ));
    }
    let mut acme = Vec::new();
    let tls = build_tls(&fc, ov, &mut listen, &err, &resolve, files, &mut acme)?;
    if listen.is_empty() && tls.is_empty() && unix_paths.is_empty() {
        listen.push(SocketAddr::from(([127, 0, 0, 1], 8080)));
    }
    let unix = wire::unix_listen(unix_paths, &fc.unix_socket).map_err(|(k, m)| err(None, &k, m))?;
    let tcp_addrs: Vec<SocketAddr> = listen
        .iter()
        .copied()
        .chain(tls.iter().map(|(a, _)| *a))
        .collect();
    let proxy_protocol =
        wire::proxy_protocol(&fc.proxy_protocol, &tcp_addrs, &unix.paths, &resolve)
            .map_err(|(span, k, m)| err(span, &k, m))?;

    let workers = match ov.workers.or(fc.workers).unwrap_or(0) {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        n if n > 1024 => return Err(err(None, "workers", format!("{n} is more than 1024"))),
        n => n,
    };

    let dest = match (ov.access_log.as_deref(), &fc.log.access) {
        (Some(s), _) => parse_access_log(s, &resolve),
        (None, Some(s)) => parse_access_log(s.get_ref(), &resolve),
        (None, None) => Dest::Stdout,
    };
    let format = match &fc.log.format {
        Some(f) => Format::parse(f.get_ref()).map_err(|m| err(Some(f.span()), "log.format", m))?,
        None => Format::Combined,
    };
    let access_log = AccessLog {
        dest,
        format: format.clone(),
    };
    let error_log = fc.log.error.as_ref().map(|p| resolve(p.get_ref()));
    let error_json = match fc.log.error_format.as_ref() {
        None => false,
        Some(f) => match f.get_ref().as_str() {
            "plain" => false,
            "json" => true,
            other => {
                return Err(err(
                    Some(f.span()),
                    "log.error_format",
                    format!("`{other}`: write \"plain\" or \"json\""),
                ))
            }
        },
    };

    let d = Limits::default();
    let l = &fc.limits;
    let limits = Limits {
        header_timeout: l.header_timeout.map_or(d.header_timeout, |v| v.0),
        keepalive_timeout: l.keepalive_timeout.map_or(d.keepalive_timeout, |v| v.0),
        send_timeout: l.send_timeout.map_or(d.send_timeout, |v| v.0),
        body_timeout: l.body_timeout.map_or(d.body_timeout, |v| v.0),
        body_min_rate: l.body_min_rate.map_or(d.body_min_rate, |v| v.0),
        shutdown_timeout: l.shutdown_timeout.map_or(d.shutdown_timeout, |v| v.0),
        max_header_bytes: l
            .max_header_bytes
            .map_or(d.max_header_bytes, |v| v.0 as usize),
        max_uri_bytes: l.max_uri_bytes.map_or(d.max_uri_bytes, |v| v.0 as usize),
        max_body_bytes: l.max_body_bytes.map_or(d.max_body_bytes, |v| v.0),
        max_connections: l.max_connections.unwrap_or(d.max_connections),
    };
    if limits.max_header_bytes < 256 {
        return Err(err(
            None,
            "limits.max_header_bytes",
            "must be at least 256".into(),
        ));
    }
    if limits.max_connections == 0 {
        return Err(err(
            None,
            "limits.max_connections",
            "must be at least 1".into(),
        ));
    }
    let http2 = build_http2(&fc.http2, &err)?;
    let http3 = build_http3(&fc.http3, &err)?;
    let mut h3 = Vec::new();
    for (addr, acceptor) in tls.iter().filter(|(_, a)| a.h3) {
        let limits = crate::proto::h3::QuicLimits {
            max_concurrent_streams: http3.max_concurrent_streams,
            idle_timeout: http3.idle_timeout,
            max_handshakes: http3.max_handshakes,
            max_datagram_size: http3.max_datagram_size,
        };
        let config = acceptor
            .quic_config()
            .and_then(|tls| crate::proto::h3::server_config(tls, &limits))
            .map_err(|m| err(None, "tls.protocols", format!("{addr}: h3: {m}")))?;
        h3.push((*addr, Arc::new(config)));
    }
    let dc = Cache::default();
    let cache = Cache {
        max_file_bytes: fc.cache.max_file_bytes.map_or(dc.max_file_bytes, |v| v.0),
        max_bytes: fc.cache.max_bytes.map_or(dc.max_bytes, |v| v.0),
        revalidate: fc.cache.revalidate.map_or(dc.revalidate, |v| v.0),
    };

    // `[lua.shared]`: one registry per process, so a reload keeps them.
    let lua_dicts: crate::handler::lua::Dicts = fc
        .lua
        .shared
        .iter()
        .map(|(name, size)| crate::handler::lua::shared::dict(name, size.0 as usize))
        .collect();
    let cgi_globals = {
        let g = &fc.cgi;
        let names = g
            .pass_env
            .clone()
            .unwrap_or_else(|| vec!["PATH".to_owned()]);
        let env: Vec<(String, String)> = names
            .iter()
            .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
            .collect();
        crate::handler::cgi::Globals {
            env: Arc::new(env),
            limiter: Arc::new(crate::handler::cgi::Limiter::new(
                g.max_processes.unwrap_or(64),
                g.queue.unwrap_or(1024),
                g.queue_timeout.map_or(Duration::from_secs(10), |d| d.0),
            )),
        }
    };
    let user = match &fc.user {
        Some(u) => {
            let name = u.get_ref();
            if name != "root" {
                crate::privileges::Account::lookup(name)
                    .map_err(|m| err(Some(u.span()), "user", m))?;
            }
            Some(name.clone())
        }
        None => None,
    };
    if fc.cgi.max_processes == Some(0) {
        return Err(err(None, "cgi.max_processes", "must be at least 1".into()));
    }
    let mut pool_specs: Vec<crate::upstream::pool::PoolSpec> = Vec::new();
    for p in &fc.pool {
        let pc = p.get_ref();
        let key = format!("pool `{}`", pc.name);
        if pool_specs.iter().any(|s| s.name == pc.name) {
            return Err(err(
                Some(p.span()),
                &key,
                "a pool of that name already exists".into(),
            ));
        }
        let command = match pc.command.clone().map(expand_stoa).transpose() {
            Ok(c) => c,
            Err(m) => return Err(err(Some(p.span()), &format!("{key}.command"), m)),
        };
        let (address, tls) = crate::upstream::tls::plan(
            pc.address.clone(),
            pc.tls.as_ref(),
            pc.protocol.as_deref() == Some("http"),
            base,
        )
        .map_err(|m| err(Some(p.span()), &format!("{key}.tls"), m))?;
        let user_of_pool = match &pc.user {
            None => None,
            Some(name) => {
                if user.as_deref() != Some("root") {
                    return Err(err(
                        Some(p.span()),
                        &format!("{key}.user"),
                        "a pool's own user needs Stoa to keep root: write the top-level \
                         `user = \"root\"`, or leave it out and the pool runs as the \
                         server's `user`"
                            .into(),
                    ));
                }
                Some(
                    crate::privileges::Account::lookup(name)
                        .map_err(|m| err(Some(p.span()), &format!("{key}.user"), m))?,
                )
            }
        };
        let spec = crate::upstream::pool::SpecTable {
            command,
            address,
            processes: pc.processes,
            min_processes: pc.min_processes,
            max_processes: pc.max_processes,
            max_requests: pc.max_requests,
            affinity: pc.affinity.as_deref(),
            balance: pc.balance.as_deref(),
            queue: pc.queue,
            queue_timeout: pc.queue_timeout.map(|d| d.0),
            timeout: pc.timeout.map(|d| d.0),
            env: pc.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            idle_timeout: pc.idle_timeout.map(|d| d.0),
            capacity: pc.capacity,
            keepalive_timeout: pc.keepalive_timeout.map(|d| d.0),
            user: user_of_pool,
            ..crate::upstream::pool::SpecTable::new(&pc.name, base)
        }
        .build()
        .map_err(|m| err(Some(p.span()), &key, m))?;
        let mut spec = spec;
        if let Some(tls) = tls {
            crate::upstream::tls::apply(&mut spec.kind, tls);
        }
        if pc.socket_activation {
            if pc.command.is_none() {
                return Err(err(
                    Some(p.span()),
                    &format!("{key}.socket_activation"),
                    "is for spawned pools (`command`)".into(),
                ));
            }
            spec.socket_activation = true;
        }
        match pc.protocol.as_deref() {
            None | Some("fastcgi") if spec.h2c => {
                return Err(err(
                    Some(p.span()),
                    &format!("{key}.address"),
                    "`h2c://` addresses are for `protocol = \"http\"` pools".into(),
                ))
            }
            Some("http") if spec.h2c && pc.health.is_some() => {
                return Err(err(
                    Some(p.span()),
                    &format!("{key}.health"),
                    "health checks speak HTTP/1.1, which `h2c://` servers do not".into(),
                ))
            }
            None | Some("fastcgi") => {
                if pc.health.is_some() {
                    return Err(err(
                        Some(p.span()),
                        &format!("{key}.health"),
                        "health checks are for `protocol = \"http\"` pools".into(),
                    ));
                }
            }
            Some("http") => {
                spec.protocol = crate::upstream::Protocol::Http;
                if pc.capacity.is_none() {
                    // Connections (and requests) at once per server, as
                    // nginx's `keepalive 32`; over HTTP/2 streams, which
                    // are cheap (a long gRPC stream holds one).
                    spec.default_capacity = if spec.h2c { 256 } else { 32 };
                }
                if let Some(h) = &pc.health {
                    if !h.path.starts_with('/') {
                        return Err(err(
                            Some(p.span()),
                            &format!("{key}.health.path"),
                            "must start with '/'".into(),
                        ));
                    }
                    spec.health = Some(crate::upstream::Health {
                        path: h.path.clone(),
                        interval: h.interval.as_ref().map_or(Duration::from_secs(2), |d| d.0),
                        timeout: h.timeout.as_ref().map_or(Duration::from_secs(1), |d| d.0),
                        fails: h.fails.unwrap_or(2).max(1),
                        passes: h.passes.unwrap_or(2).max(1),
                    });
                }
            }
            Some(other) => {
                return Err(err(
                    Some(p.span()),
                    &format!("{key}.protocol"),
                    format!("`{other}`: use \"fastcgi\" or \"http\""),
                ))
            }
        }
        pool_specs.push(spec);
    }
    let mut no_client_auth = None;
    // A route that requires a client certificate where no TLS block asks
    // for one answers every request 403: likely a forgotten `client_auth`.
    let requires = |v: &Option<toml::Spanned<bool>>| v.as_ref().is_some_and(|b| *b.get_ref());
    if fc.tls.iter().all(|b| b.get_ref().client_auth.is_none())
        && fc.site.iter().any(|s| {
            requires(&s.require_client_cert)
                || s.route.iter().any(|r| requires(&r.require_client_cert))
        })
    {
        no_client_auth = Some(format!(
            "{file}: `require_client_cert` is set but no [[tls]] block has `client_auth`: \
             those requests all get 403"
        ));
    }
    let mut site_cfgs = fc.site;
    if let Some(root) = &ov.root {
        let root = root.display().to_string();
        match site_cfgs.first_mut() {
            Some(first) => first.root = Some(Spanned::new(0..0, root)),
            None => site_cfgs.push(SiteConfig {
                root: Some(Spanned::new(0..0, root)),
                ..SiteConfig::default()
            }),
        }
    }
    if site_cfgs.is_empty() {
        return Err(err(
            None,
            "site",
            "no [[site]] is configured (and no directory given)".into(),
        ));
    }

    // `[[cache_zone]]`: zones live in a process-wide registry by name, so
    // that a reload finds its objects again (`cache::store::zone`).
    let mut cache_zones: Vec<Arc<crate::cache::store::Zone>> = Vec::new();
    for z in &fc.cache_zone {
        let zt = z.get_ref();
        let key = format!("cache_zone `{}`", zt.name);
        let spec = zt
            .spec(&resolve)
            .map_err(|(k, m)| err(Some(z.span()), &format!("{key}.{k}"), m))?;
        if cache_zones.iter().any(|c| c.name() == spec.name) {
            return Err(err(
                Some(z.span()),
                &key,
                "a zone of that name already exists".into(),
            ));
        }
        let zone = if ov.dry_run {
            // `stoa check`: nothing made on disk, nothing registered.
            crate::cache::store::Zone::detached(&spec)
        } else {
            crate::cache::store::zone(&spec)
        };
        cache_zones.push(zone.map_err(|e| err(Some(z.span()), &key, e.to_string()))?);
    }
    let mut sites = Vec::new();
    let mut warnings: Vec<String> = no_client_auth.into_iter().collect();
    // HTTP-01 is answered on cleartext TCP listeners only.
    if listen.is_empty() {
        for a in acme
            .iter()
            .filter(|a| a.challenges == [crate::acme::Challenge::Http01])
        {
            warnings.push(format!(
                "{file}: tls.acme for {}: challenges = [\"http-01\"] but no cleartext `listen` address: the CA's validation cannot be answered",
                a.hosts.join(", ")
            ));
        }
    }
    for (i, sc) in site_cfgs.iter().enumerate() {
        let key = format!("site[{i}]");
        let index = sc
            .index
            .clone()
            .unwrap_or_else(|| vec!["index.html".to_owned()]);
        for name in &index {
            if name.is_empty() || name.contains('/') || name == ".." || name == "." {
                return Err(err(
                    None,
                    &format!("{key}.index"),
                    format!("`{name}` is not a file name"),
                ));
            }
        }
        // Names a script route of this site runs: never served as files,
        // whatever route or index setting leads to them.
        let mut scripts: Vec<String> = Vec::new();
        for rc in &sc.route {
            for (_, h) in rc.handlers() {
                let Some((_, h)) = h else { continue };
                if let (Some(suffix), true) = (&rc.suffix, h.runs_scripts()) {
                    scripts.push(suffix.to_ascii_lowercase());
                }
                if let Some(marker) = h.script_marker() {
                    scripts.push(marker.to_ascii_lowercase());
                }
            }
        }
        scripts.sort();
        scripts.dedup();
        let site_root = sc.root.as_ref().map(|r| resolve(r.get_ref()));
        let document_root = site_root
            .as_ref()
            .map(|r| r.canonicalize().unwrap_or(r.clone()).display().to_string())
            .unwrap_or_default();
        let site_cx = configure::SiteCtx {
            root: site_root.clone(),
            document_root,
            index: index.clone(),
            autoindex: sc.autoindex,
            follow_symlinks: sc.follow_symlinks,
            scripts,
        };
        let fallback = match &sc.root {
            Some(r) => {
                let span = if r.span() == (0..0) {
                    None
                } else {
                    Some(r.span())
                };
                let cfg = site_cx
                    .open_static(&resolve(r.get_ref()), index.clone(), sc.autoindex, None)
                    .map_err(|m| err(span, &format!("{key}.root"), m))?;
                Some(Handler::Static(Arc::new(cfg)))
            }
            None => None,
        };
        let pool = |name: &str, want: crate::upstream::Protocol| {
            let i = pool_specs
                .iter()
                .position(|p| p.name == name)
                .ok_or_else(|| format!("no [[pool]] named `{name}`"))?;
            if pool_specs[i].protocol != want {
                return Err(format!(
                    "pool `{name}` speaks {}",
                    match pool_specs[i].protocol {
                        crate::upstream::Protocol::Http => "HTTP: use `proxy`",
                        crate::upstream::Protocol::FastCgi => "FastCGI: use `fastcgi` or `php`",
                    }
                ));
            }
            Ok(i)
        };
        let mut routes = Vec::new();
        // Per site: routes inheriting the site's limits share their tables.
        let access_builder = std::cell::RefCell::new(crate::access::Builder::default());
        for (j, rc) in sc.route.iter().enumerate() {
            let rkey = format!("{key}.route[{j}]");
            let handlers = rc.handlers();
            let mut present = handlers.iter().filter_map(|(_, h)| h.clone());
            let split = present.clone().any(|(_, h)| h.splits_path());
            let matcher = match (&rc.prefix, &rc.suffix, &rc.regex) {
                (Some(p), None, None) if p.starts_with('/') => Matcher::Prefix(p.clone()),
                (Some(_), None, None) => {
                    return Err(err(
                        None,
                        &format!("{rkey}.prefix"),
                        "must start with '/'".into(),
                    ))
                }
                (None, Some(s), None) if !s.is_empty() => Matcher::Suffix {
                    suffix: s.clone(),
                    split,
                },
                (None, None, Some(re)) => {
                    let r = regex::Regex::new(re.get_ref()).map_err(|e| {
                        err(Some(re.span()), &format!("{rkey}.regex"), e.to_string())
                    })?;
                    // Script names are kept from static routes by their
                    // suffix; a regex gives none. An extension regex
                    // (`\.php$`) running FastCGI without `split_path`
                    // leaves `/X.PHP` (if its case differs) to a static
                    // route, as source.
                    let ext = re.get_ref().ends_with('$') && re.get_ref().contains("\\.");
                    if ext && rc.fastcgi.is_some() && !split {
                        warnings.push(format!(
                            "{file}: {rkey}: a `fastcgi` route on a `regex` names no script suffix: \
                             files its regex misses may be served as source by static routes; \
                             give `split_path` (e.g. \".php\") or use `suffix`"
                        ));
                    }
                    Matcher::Regex(r)
                }
                _ => {
                    return Err(err(
                        None,
                        &rkey,
                        "give exactly one of `prefix`, `suffix` or `regex`".into(),
                    ))
                }
            };
            let (Some((span, h)), None) = (present.next(), present.next()) else {
                let msg = if handlers.iter().all(|(_, h)| h.is_none()) {
                    let names: Vec<String> =
                        handlers.iter().map(|(n, _)| format!("`{n}`")).collect();
                    let (last, rest) = names.split_last().unwrap_or((&names[0], &[]));
                    format!("no handler ({} or {last})", rest.join(", "))
                } else {
                    "one handler per route".to_owned()
                };
                return Err(err(None, &rkey, msg));
            };
            let hcx = configure::Ctx {
                prefix: rc.prefix.as_deref(),
                regex: match &matcher {
                    Matcher::Regex(re) => Some(re),
                    _ => None,
                },
                request_buffering: rc.request_buffering.unwrap_or(true),
                response_buffering: rc.response_buffering.as_ref(),
                site: &site_cx,
                resolve: &resolve,
                pool: &pool,
                cgi: &cgi_globals,
                lua_dicts: &lua_dicts,
            };
            let handler = h
                .configure(&hcx)
                .map_err(|f| err(span, &format!("{rkey}.{}", f.key), f.message))?;
            if rc.response_buffering.is_some() && !matches!(handler, Handler::Proxy(_)) {
                return Err(err(
                    None,
                    &format!("{rkey}.response_buffering"),
                    "only a `proxy` route buffers responses".into(),
                ));
            }
            let cx = edge::Ctx {
                key: &rkey,
                err: &err,
                resolve: &resolve,
                log_format: &format,
                pools: &pool_specs,
                lua_dicts: &lua_dicts,
                access: &access_builder,
                cache_zones: &cache_zones,
                reaches_app: matches!(
                    handler,
                    Handler::Proxy(_) | Handler::FastCgi(_) | Handler::Php(_) | Handler::Cgi(_)
                ),
            };
            let access =
                edge::access(sc, Some(rc), &cx)?.settle(Some(&handler), rc.try_files.is_some());
            let edge = edge::resolve(sc, Some(rc), &cx)?;
            if let Some(tf) = &rc.try_files {
                if tf.len() < 2 {
                    return Err(err(
                        None,
                        &format!("{rkey}.try_files"),
                        "needs at least one file and a last entry (a URI or `=CODE`)".into(),
                    ));
                }
                let last = &tf[tf.len() - 1];
                let ok = match last.strip_prefix('=') {
                    Some(code) => code.parse::<u16>().is_ok_and(|c| (400..600).contains(&c)),
                    None => last.starts_with('/'),
                };
                if !ok {
                    return Err(err(
                        None,
                        &format!("{rkey}.try_files"),
                        format!("the last entry `{last}` is neither a URI starting with '/' nor `=CODE` (400-599)"),
                    ));
                }
                if site_root.is_none() {
                    return Err(err(
                        None,
                        &format!("{rkey}.try_files"),
                        "looks files up under the site's `root`, and the site has none".into(),
                    ));
                }
            }
            routes.push((
                j,
                Route {
                    matcher,
                    handler,
                    try_files: rc.try_files.clone(),
                    access,
                    edge,
                },
            ));
        }
        // The routing rule: deny routes first, then suffix and regex
        // routes in file order, then prefix routes, longest first (a stable
        // sort keeps the file order within each class). docs/CONFIG.md,
        // "Route order", says why.
        routes.sort_by_key(|(_, r)| match (&r.handler, &r.matcher) {
            (Handler::Deny, _) => (0, 0),
            (_, Matcher::Suffix { .. } | Matcher::Regex(_)) => (1, 0),
            (_, Matcher::Prefix(p)) => (2, usize::MAX - p.len()),
        });
        let patterns: Vec<reach::Pattern<'_>> =
            routes.iter().map(|(_, r)| r.matcher.pattern()).collect();
        for (k, takers) in reach::never_chosen(&patterns).into_iter().enumerate() {
            let Some(takers) = takers else { continue };
            let names: Vec<String> = takers
                .iter()
                .map(|&t| format!("{key}.route[{}]", routes[t].0))
                .collect();
            warnings.push(format!(
                "{file}: {key}.route[{}]: never used: every path it takes is taken first by {}",
                routes[k].0,
                names.join(" and ")
            ));
        }
        let routes: Vec<Route> = routes.into_iter().map(|(_, r)| r).collect();
        if routes.is_empty() && fallback.is_none() {
            return Err(err(
                None,
                &key,
                "needs a `root` or at least one route".into(),
            ));
        }
        let mut rewrites = Vec::new();
        for (j, rw) in sc.rewrite.iter().enumerate() {
            let r = rw.get_ref();
            let from = regex::Regex::new(&r.from).map_err(|e| {
                err(
                    Some(rw.span()),
                    &format!("{key}.rewrite[{j}].from"),
                    e.to_string(),
                )
            })?;
            if !r.to.starts_with('/') {
                return Err(err(
                    Some(rw.span()),
                    &format!("{key}.rewrite[{j}].to"),
                    "must start with '/'".into(),
                ));
            }
            rewrites.push(Rewrite {
                from,
                to: r.to.clone(),
            });
        }
        let hosts = sc.hosts.clone().unwrap_or_else(|| vec!["*".to_owned()]);
        let cx = edge::Ctx {
            key: &key,
            err: &err,
            resolve: &resolve,
            log_format: &format,
            pools: &pool_specs,
            lua_dicts: &lua_dicts,
            access: &access_builder,
            cache_zones: &cache_zones,
            // A site's root is its static files.
            reaches_app: false,
        };
        let access = edge::access(sc, None, &cx)?.settle(fallback.as_ref(), false);
        let edge = edge::resolve(sc, None, &cx)?;
        sites.push(Site {
            hosts: hosts.iter().map(|h| HostPattern::parse(h)).collect(),
            routes,
            fallback,
            root: site_root.map(|r| r.canonicalize().unwrap_or(r)),
            index,
            rewrites,
            allow_dotfiles: sc.allow_dotfiles,
            https_redirect: sc.https_redirect,
            hsts: match &sc.hsts {
                Some(v) => Some(
                    check_hsts(v.get_ref())
                        .map_err(|m| err(Some(v.span()), &format!("{key}.hsts"), m))?
                        .into_bytes(),
                ),
                None => None,
            },
            access,
            edge,
        });
    }
    // HTTP-01 answers are looked up where the transport rules are.
    let transport_rules = sites.iter().any(|s| s.https_redirect || s.hsts.is_some())
        || crate::acme::any_http01(&acme);
    let max_body_ceiling = sites
        .iter()
        .flat_map(|s| std::iter::once(&s.edge).chain(s.routes.iter().map(|r| &r.edge)))
        .filter_map(|e| e.max_body_bytes)
        .fold(limits.max_body_bytes, u64::max);
    let https_port = match tls.iter().map(|(a, _)| a.port()).collect::<Vec<_>>() {
        ports if ports.is_empty() || ports.contains(&443) => None,
        ports => Some(ports[0]),
    };

    Ok(Runtime {
        listen,
        unix,
        proxy_protocol,
        tls,
        acme,
        workers,
        user,
        access_log,
        error_log,
        error_json,
        limits,
        max_body_ceiling,
        cache,
        http2,
        http3,
        h3,
        sites,
        transport_rules,
        https_port,
        pool_specs,
        pools: Vec::new(),
        source: file.to_owned(),
        warnings,
        me: std::sync::Weak::new(),
    })
}

/// Makes a config error at a span of the file, for a key.
type ErrAt<'a> = dyn Fn(Option<std::ops::Range<usize>>, &str, String) -> ConfigError + 'a;

/// The TLS listeners: `[[tls]]` blocks grouped by address, or the
/// command line's `--tls-cert`/`--tls-key` for every `--listen` address
/// (which then leave `listen`). Certificates and keys are read here, so
/// that a bad one fails start-up or a reload with its path.
fn build_tls(
    fc: &FileConfig,
    ov: &Overrides,
    listen: &mut Vec<SocketAddr>,
    err: &ErrAt<'_>,
    resolve: &dyn Fn(&str) -> PathBuf,
    files: &Files,
    acme: &mut Vec<crate::acme::Spec>,
) -> Result<Vec<(SocketAddr, Arc<crate::proto::tls::Acceptor>)>, ConfigError> {
    use crate::proto::tls::{self, Acceptor, TlsSite};
    let default_protocols: Vec<String> = tls::PROTOCOLS.iter().map(|p| p.to_string()).collect();
    let mut out: Vec<(SocketAddr, Acceptor)> = Vec::new();
    let mut add = |addr: SocketAddr, site: TlsSite, h3: bool| match out
        .iter_mut()
        .find(|(a, _)| *a == addr)
    {
        Some((_, acc)) => {
            acc.h3 |= h3;
            acc.sites.push(site)
        }
        None => out.push((
            addr,
            Acceptor {
                sites: vec![site],
                h3,
            },
        )),
    };
    match (&ov.tls_cert, &ov.tls_key) {
        (Some(cert), Some(key)) => {
            let (config, slot) = load_tls(files, cert, key, &default_protocols)
                .map_err(|m| err(None, "--tls-cert", m))?;
            let config = Arc::new(config);
            let addrs = if ov.listen.is_empty() {
                vec![SocketAddr::from(([127, 0, 0, 1], 8443))]
            } else {
                std::mem::take(listen)
            };
            for a in addrs {
                let site = TlsSite {
                    hosts: Vec::new(),
                    cert: cert.clone(),
                    config: config.clone(),
                    slot: slot.clone(),
                    clients: None,
                };
                add(a, site, false);
            }
        }
        (None, None) => {
            for b in &fc.tls {
                let span = Some(b.span());
                let t = b.get_ref();
                let mut protocols = t.protocols.clone().unwrap_or(default_protocols.clone());
                if protocols.is_empty() {
                    return Err(err(span, "tls.protocols", "is empty".into()));
                }
                if let Some(p) = protocols
                    .iter()
                    .find(|p| !tls::PROTOCOLS.contains(&p.as_str()) && *p != tls::H3)
                {
                    return Err(err(
                        span,
                        "tls.protocols",
                        format!("`{p}`: Stoa speaks \"h3\", \"h2\" and \"http/1.1\""),
                    ));
                }
                // "h3" is QUIC's ALPN name, on the UDP side: the TCP
                // handshake offers the others.
                let h3 = protocols.iter().any(|p| p == tls::H3);
                protocols.retain(|p| p != tls::H3);
                if protocols.is_empty() {
                    // Clients find HTTP/3 through Alt-Svc on a TCP
                    // response (RFC 9114 §3.1.1): without one, none would.
                    return Err(err(
                        span,
                        "tls.protocols",
                        "\"h3\" needs \"h2\" or \"http/1.1\" beside it: clients learn of HTTP/3 from Alt-Svc on those".into(),
                    ));
                }
                if t.listen.is_empty() {
                    return Err(err(span, "tls.listen", "no address".into()));
                }
                let cert = resolve(&t.cert);
                let key = resolve(&t.key);
                let (config, slot) = if let Some(table) = &t.acme {
                    if !t.cert.is_empty() || !t.key.is_empty() || t.self_signed {
                        return Err(err(
                            span,
                            "tls.acme",
                            "`acme` obtains the certificate: no `cert`, `key` or `self_signed` beside it".into(),
                        ));
                    }
                    let mut spec = crate::acme::Spec::new(table, &t.hosts, resolve)
                        .map_err(|m| err(span.clone(), "tls.acme", m))?;
                    if let Some(ca) = &spec.directory_ca {
                        let pem = files.read(ca).map_err(|e| {
                            err(span.clone(), "tls.acme.directory_ca", format!("{}: cannot read: {e}", ca.display()))
                        })?;
                        spec.directory_ca_pem = Some(pem);
                    }
                    let slot = crate::acme::slot(&spec).map_err(|m| err(span.clone(), "tls.acme", m))?;
                    acme.push(spec);
                    tls::server_config(slot.clone(), &protocols).map(|c| (c, slot))
                } else if t.cert.is_empty() || t.key.is_empty() {
                    return Err(err(
                        span,
                        "tls",
                        "needs `cert` and `key` (or `acme`)".into(),
                    ));
                } else if t.self_signed && !(files.exists(&cert) && files.exists(&key)) {
                        self_signed(&cert, &key, &t.hosts, &protocols, ov.dry_run, files)
                    } else {
                        load_tls(files, &cert, &key, &protocols)
                    }
                    .map_err(|m| err(span.clone(), "tls", m))?;
                let (mut config, clients) = match &t.client_auth {
                    Some(c) => {
                        let (config, v) = client_auth(&slot, &protocols, c, resolve, files)
                            .map_err(|m| err(span.clone(), "tls.client_auth", m))?;
                        (config, Some(v))
                    }
                    None => (config, None),
                };
                if let Some(keys) = ticket_keys(files, &t.session_ticket_keys, resolve)
                    .map_err(|m| err(span.clone(), "tls.session_ticket_keys", m))?
                {
                    config.ticketer = Arc::new(keys);
                }
                if let Some(r) = &t.ocsp_responder {
                    if !r.starts_with("http://") {
                        return Err(err(
                            span,
                            "tls.ocsp_responder",
                            format!(
                                "`{r}`: an http:// URL (OCSP is asked over HTTP, RFC 6960 A.1)"
                            ),
                        ));
                    }
                }
                if t.ocsp_stapling {
                    crate::proto::tls::ocsp::watch(
                        &slot,
                        crate::proto::tls::ocsp::Settings {
                            responder: t.ocsp_responder.clone(),
                            cache: t.ocsp_cache.as_deref().map(resolve),
                            label: if t.acme.is_some() {
                                t.hosts.join(", ")
                            } else {
                                cert.display().to_string()
                            },
                        },
                    );
                }
                let config = Arc::new(config);
                let hosts: Vec<String> = t.hosts.iter().map(|h| h.to_ascii_lowercase()).collect();
                for l in &t.listen {
                    let a = parse_addr(l).map_err(|m| err(span.clone(), "tls.listen", m))?;
                    // Port 0: each listener gets a port of its own.
                    if a.port() != 0 && listen.contains(&a) {
                        return Err(err(
                            span.clone(),
                            "tls.listen",
                            format!("{a} is also in `listen`: one address speaks TLS or not"),
                        ));
                    }
                    add(
                        a,
                        TlsSite {
                            hosts: hosts.clone(),
                            cert: cert.clone(),
                            config: config.clone(),
                            slot: slot.clone(),
                            clients: clients.clone(),
                        },
                        h3,
                    );
                }
            }
        }
        (Some(_), None) => return Err(err(None, "--tls-cert", "needs --tls-key".into())),
        (None, Some(_)) => return Err(err(None, "--tls-key", "needs --tls-cert".into())),
    }
    // QUIC's TLS config is one per address, and rustls takes one client
    // verifier per config, not one per SNI name as the TCP side picks
    // blocks: a block with `client_auth` must be alone on an "h3" address.
    for (addr, acc) in &out {
        if acc.h3 && acc.sites.len() > 1 && acc.sites.iter().any(|s| s.clients.is_some()) {
            return Err(err(
                None,
                "tls.client_auth",
                format!(
                    "{addr} serves HTTP/3 and several [[tls]] blocks, one with `client_auth`: \
                     QUIC verifies clients for the whole address, so such a block needs an address of its own"
                ),
            ));
        }
    }
    Ok(out.into_iter().map(|(a, acc)| (a, Arc::new(acc))).collect())
}

/// The ticketer of a `[[tls]]` block's `session_ticket_keys`, read
/// through `files` (the privileged parent reads them: they are secrets,
/// as readable as the private key). Read again at every reload.
fn ticket_keys(
    files: &Files,
    paths: &[String],
    resolve: &dyn Fn(&str) -> PathBuf,
) -> Result<Option<crate::proto::tls::tickets::FileTicketer>, String> {
    let mut read = Vec::with_capacity(paths.len());
    for p in paths {
        let path = resolve(p);
        let bytes = files
            .read(&path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        read.push((path, bytes));
    }
    crate::proto::tls::tickets::FileTicketer::new(&read).map_err(|e| e.to_string())
}

/// A certificate chain and its key, read through `files`.
fn load_tls(
    files: &Files,
    cert: &Path,
    key: &Path,
    protocols: &[String],
) -> Result<(rustls::ServerConfig, Arc<crate::proto::tls::CertSlot>), String> {
    let read = |p: &Path| {
        files
            .read(p)
            .map_err(|e| format!("{}: cannot read: {e}", p.display()))
    };
    crate::proto::tls::load(cert, &read(cert)?, key, &read(key)?, protocols)
}

/// The config of a block with `client_auth` (certificate in `slot`) and
/// its verifier: its CA and CRL files read through `files`, clients
/// verified with them.
fn client_auth(
    slot: &Arc<crate::proto::tls::CertSlot>,
    protocols: &[String],
    c: &crate::proto::tls::client::ClientAuthConfig,
    resolve: &dyn Fn(&str) -> PathBuf,
    files: &Files,
) -> Result<
    (
        rustls::ServerConfig,
        Arc<dyn rustls::server::danger::ClientCertVerifier>,
    ),
    String,
> {
    use crate::proto::tls::{self, client};
    let ca = resolve(&c.ca);
    let crl = c.crl.as_deref().map(resolve);
    let v =
        client::verifier(c, &ca, crl.as_deref(), &|p| files.read(p)).map_err(|e| e.to_string())?;
    let config = tls::server_config_with(slot.clone(), protocols, Some(v.clone()))?;
    Ok((config, v))
}

/// A `Strict-Transport-Security` value (RFC 6797 §6.1): directives
/// separated by `;`, one of them `max-age=SECONDS`; returned trimmed.
fn check_hsts(v: &str) -> Result<String, String> {
    let v = v.trim();
    if !v
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic())
    {
        return Err("must be printable ASCII".into());
    }
    let mut max_age = false;
    for d in v.split(';').map(str::trim).filter(|d| !d.is_empty()) {
        let (name, value) = match d.split_once('=') {
            Some((n, val)) => (n.trim(), Some(val.trim().trim_matches('"'))),
            None => (d, None),
        };
        if name.eq_ignore_ascii_case("max-age") {
            if max_age
                || !value.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            {
                return Err(format!("`{d}`: write one max-age=SECONDS"));
            }
            max_age = true;
        } else if !(name.eq_ignore_ascii_case("includeSubDomains")
            || name.eq_ignore_ascii_case("preload"))
            || value.is_some()
        {
            return Err(format!(
                "`{d}`: unknown directive (max-age=N, includeSubDomains, preload)"
            ));
        }
    }
    if !max_age {
        return Err("needs max-age=SECONDS, e.g. \"max-age=31536000\"".into());
    }
    Ok(v.to_owned())
}

/// `[http2]`, validated: windows and frame sizes within what RFC 9113
/// allows (§6.5.2, §6.9.1), none so small that a connection cannot work.
fn build_http2(h: &Http2Config, err: &ErrAt<'_>) -> Result<Http2Limits, ConfigError> {
    let d = Http2Limits::default();
    let in_range =
        |key: &str, v: Option<Size>, lo: u64, hi: u64, def: u64| -> Result<u64, ConfigError> {
            let n = v.map_or(def, |s| s.0);
            if !(lo..=hi).contains(&n) {
                return Err(err(
                    None,
                    &format!("http2.{key}"),
                    format!("{n} is outside {lo}..={hi}"),
                ));
            }
            Ok(n)
        };
    const MAX_WINDOW: u64 = (1 << 31) - 1;
    let limits = Http2Limits {
        max_concurrent_streams: h.max_concurrent_streams.unwrap_or(d.max_concurrent_streams),
        initial_window_size: in_range(
            "initial_window_size",
            h.initial_window_size,
            1024,
            MAX_WINDOW,
            u64::from(d.initial_window_size),
        )? as u32,
        initial_connection_window_size: in_range(
            "initial_connection_window_size",
            h.initial_connection_window_size,
            65_535,
            MAX_WINDOW,
            u64::from(d.initial_connection_window_size),
        )? as u32,
        max_frame_size: in_range(
            "max_frame_size",
            h.max_frame_size,
            16_384,
            (1 << 24) - 1,
            u64::from(d.max_frame_size),
        )? as u32,
        max_header_list_size: in_range(
            "max_header_list_size",
            h.max_header_list_size,
            1024,
            16 << 20,
            u64::from(d.max_header_list_size),
        )? as u32,
        max_send_buffer: in_range(
            "max_send_buffer",
            h.max_send_buffer,
            1024,
            1 << 30,
            d.max_send_buffer as u64,
        )? as usize,
        max_pending_accept_reset_streams: h
            .max_pending_accept_reset_streams
            .unwrap_or(d.max_pending_accept_reset_streams),
        max_local_error_reset_streams: h
            .max_local_error_reset_streams
            .unwrap_or(d.max_local_error_reset_streams),
        max_control_frames: h.max_control_frames.unwrap_or(d.max_control_frames),
    };
    if limits.max_concurrent_streams == 0 {
        return Err(err(
            None,
            "http2.max_concurrent_streams",
            "must be at least 1".into(),
        ));
    }
    Ok(limits)
}

/// `[http3]`, validated: limits as `[http2]`'s, a retry policy, and
/// 0-RTT refused (it is replayable, RFC 9001 §9.2, and Stoa has no
/// RFC 8470 `Early-Data` handling yet).
fn build_http3(h: &Http3Config, err: &ErrAt<'_>) -> Result<Http3Limits, ConfigError> {
    let d = Http3Limits::default();
    let streams = h.max_concurrent_streams.unwrap_or(d.max_concurrent_streams);
    if streams == 0 {
        return Err(err(
            None,
            "http3.max_concurrent_streams",
            "must be at least 1".into(),
        ));
    }
    let field = h
        .max_field_section_size
        .map_or(d.max_field_section_size, |s| s.0);
    if !(1024..=16 << 20).contains(&field) {
        return Err(err(
            None,
            "http3.max_field_section_size",
            format!("{field} is outside 1024..={}", 16 << 20),
        ));
    }
    let idle = h.idle_timeout.map_or(d.idle_timeout, |v| v.0);
    // QUIC's idle timeout is a varint of milliseconds (RFC 9000 §18.2).
    if idle.is_zero() || idle > std::time::Duration::from_secs(3600) {
        return Err(err(
            None,
            "http3.idle_timeout",
            "must be between 1 ms and 1 h".into(),
        ));
    }
    let max_handshakes = h.max_handshakes.unwrap_or(d.max_handshakes);
    if max_handshakes == 0 {
        return Err(err(
            None,
            "http3.max_handshakes",
            "must be at least 1".into(),
        ));
    }
    let datagram = h.max_datagram_size.unwrap_or(d.max_datagram_size);
    // QUIC's smallest datagram (RFC 9000 §14) to the largest UDP payload
    // (RFC 9000 §18.2, max_udp_payload_size).
    if !(1200..=65527).contains(&datagram) {
        return Err(err(
            None,
            "http3.max_datagram_size",
            format!("{datagram} is outside 1200..=65527"),
        ));
    }
    let retry = match h.retry.as_deref() {
        None => d.retry,
        Some("always") => H3Retry::Always,
        Some("under_load") => H3Retry::UnderLoad,
        Some("never") => H3Retry::Never,
        Some(other) => {
            return Err(err(
                None,
                "http3.retry",
                format!("`{other}`: \"always\", \"under_load\" or \"never\""),
            ))
        }
    };
    let qpack_max_table_capacity = h
        .qpack_max_table_capacity
        .map_or(d.qpack_max_table_capacity, |s| s.0);
    if qpack_max_table_capacity > 1 << 20 {
        return Err(err(
            None,
            "http3.qpack_max_table_capacity",
            format!("{qpack_max_table_capacity} is above 1 MiB"),
        ));
    }
    // The default follows a smaller stream limit; a value set above it
    // is refused (streams past the limit cannot exist to be blocked).
    let qpack_blocked_streams = h
        .qpack_blocked_streams
        .unwrap_or(d.qpack_blocked_streams.min(u64::from(streams)));
    if qpack_blocked_streams > u64::from(streams) {
        return Err(err(
            None,
            "http3.qpack_blocked_streams",
            format!("{qpack_blocked_streams} is above max_concurrent_streams ({streams})"),
        ));
    }
    if h.early_data == Some(true) {
        return Err(err(
            None,
            "http3.early_data",
            "0-RTT is not supported: its requests can be replayed (RFC 9001 §9.2)".into(),
        ));
    }
    Ok(Http3Limits {
        max_concurrent_streams: streams,
        max_field_section_size: field,
        idle_timeout: idle,
        max_handshakes,
        max_datagram_size: datagram,
        retry,
        qpack_max_table_capacity,
        qpack_blocked_streams,
    })
}

/// When a QUIC listener makes a client prove its address with a Retry
/// (RFC 9000 §8.1.2) before it spends a handshake on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H3Retry {
    Always,
    /// Once more than half of `max_handshakes` are in progress on a
    /// worker (an Initial flood from spoofed addresses).
    UnderLoad,
    Never,
}

/// `[http3]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Http3Limits {
    /// Request streams a client may have open at once (QUIC's
    /// `initial_max_streams_bidi`).
    pub max_concurrent_streams: u32,
    /// The largest request head (SETTINGS_MAX_FIELD_SECTION_SIZE, RFC
    /// 9114 §7.2.4.1): as `[http2] max_header_list_size`.
    pub max_field_section_size: u64,
    /// A connection with nothing received for this long is closed
    /// (QUIC's `max_idle_timeout`).
    pub idle_timeout: std::time::Duration,
    /// Handshakes in progress per worker; Initial packets past it are
    /// refused (bounded memory under an Initial flood).
    pub max_handshakes: usize,
    /// The largest UDP payload MTU discovery may try (quinn's
    /// `MtuDiscoveryConfig::upper_bound`): 1452 fits a 1500-byte
    /// Ethernet path; loopback and jumbo frames carry more, and a
    /// response that fits one datagram costs one packet instead of two.
    pub max_datagram_size: u16,
    pub retry: H3Retry,
    /// The QPACK dynamic table a client's encoder may fill, in bytes
    /// (SETTINGS_QPACK_MAX_TABLE_CAPACITY, RFC 9204 §5): per connection,
    /// as `[http2]`'s HPACK table; 0 turns it off.
    pub qpack_max_table_capacity: u64,
    /// Request streams that may wait for QPACK inserts at once
    /// (SETTINGS_QPACK_BLOCKED_STREAMS); one more is a connection error.
    pub qpack_blocked_streams: u64,
}

impl Default for Http3Limits {
    fn default() -> Self {
        Http3Limits {
            max_concurrent_streams: 100,
            max_field_section_size: 16 << 10,
            idle_timeout: std::time::Duration::from_secs(30),
            max_handshakes: 1024,
            max_datagram_size: 1452,
            retry: H3Retry::UnderLoad,
            qpack_max_table_capacity: 4096,
            qpack_blocked_streams: 16,
        }
    }
}

/// A `self_signed` block whose files are missing: a certificate for
/// `hosts` (else localhost) written where `cert` and `key` say, then
/// loaded; with `dry_run`, written to a temporary directory instead and
/// removed once loaded.
fn self_signed(
    cert: &Path,
    key: &Path,
    hosts: &[String],
    protocols: &[String],
    dry_run: bool,
    files: &Files,
) -> Result<(rustls::ServerConfig, Arc<crate::proto::tls::CertSlot>), String> {
    let (cert, key, tmp) = if dry_run {
        let d = std::env::temp_dir().join(format!("stoa-check-{}", std::process::id()));
        (d.join("cert.pem"), d.join("key.pem"), Some(d))
    } else {
        (cert.to_path_buf(), key.to_path_buf(), None)
    };
    let made = crate::cert::write_self_signed(&cert, &key, hosts)
        .and_then(|()| load_tls(files, &cert, &key, protocols));
    match tmp {
        Some(d) => {
            let _ = std::fs::remove_dir_all(d);
        }
        None if made.is_ok() => tracing::info!(
            "wrote a self-signed certificate to {} and its key to {} (tls.self_signed)",
            cert.display(),
            key.display()
        ),
        None => {}
    }
    made
}

fn parse_access_log(s: &str, resolve: &dyn Fn(&str) -> PathBuf) -> Dest {
    match s {
        "off" => Dest::Off,
        "-" => Dest::Stdout,
        p => Dest::File(resolve(p)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[log]`: a template is checked when the file is read (nginx refuses
    /// an unknown variable in `log_format` at start-up), and names the
    /// line; a route's `access_log` is off, a file of its own in the
    /// server's format, or the server's.
    #[test]
    fn log_keys_are_checked_and_routes_get_their_own_logs() {
        let d = dir();
        let bad = "[log]\naccess = \"a.log\"\nformat = \"$remote_addr $nope\"\n";
        let e = from_str(bad, "t.toml", &d, &Overrides::default()).expect_err("unknown variable");
        assert_eq!((e.line, e.key.as_str()), (Some(3), "log.format"), "{e}");
        assert!(e.message.contains("$nope"), "{e}");
        let bad = "[log]\nerror_format = \"xml\"\n";
        let e = from_str(bad, "t.toml", &d, &Overrides::default()).expect_err("bad format");
        assert_eq!(e.key, "log.error_format");
        let text = "[log]\naccess = \"a.log\"\nformat = \"json\"\nerror = \"e.log\"\nerror_format = \"json\"\n\
                    [[site]]\nroot = \".\"\n\
                    [[site.route]]\nprefix = \"/q/\"\nstatic = {}\naccess_log = false\n\
                    [[site.route]]\nprefix = \"/o/\"\nstatic = {}\naccess_log = \"o.log\"\n\
                    [[site.route]]\nprefix = \"/s/\"\nstatic = {}\naccess_log = true\n";
        let rt = from_str(text, "t.toml", &d, &Overrides::default()).expect("valid");
        assert_eq!(rt.access_log.format, Format::Json);
        assert_eq!(rt.error_log, Some(d.join("e.log")));
        assert!(rt.error_json);
        let log_of = |p: &str| {
            rt.sites[0]
                .routes
                .iter()
                .find(|r| matches!(&r.matcher, Matcher::Prefix(x) if x == p))
                .expect("route")
                .edge
                .access_log
                .clone()
        };
        assert_eq!(log_of("/q/"), Some(AccessLog::OFF));
        assert_eq!(
            log_of("/o/"),
            Some(AccessLog {
                dest: Dest::File(d.join("o.log")),
                format: Format::Json
            })
        );
        assert_eq!(log_of("/s/"), None);
    }

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("stoa-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_documented_shape_is_accepted() {
        let d = dir();
        std::fs::create_dir_all(d.join("public")).unwrap();
        let text = r#"
listen = ["127.0.0.1:8080", "[::1]:8081"]
workers = 3
[log]
access = "off"
[limits]
header_timeout = "10s"
keepalive_timeout = "15s"
max_header_bytes = 16384
max_body_bytes = "16 MiB"
max_connections = 10000
[[site]]
hosts = ["*"]
root = "public"
index = ["index.html"]
autoindex = false
"#;
        let rt = from_str(text, "t.toml", &d, &Overrides::default()).unwrap();
        assert_eq!(rt.listen.len(), 2);
        assert_eq!(rt.workers, 3);
        assert_eq!(rt.access_log.dest, Dest::Off);
        assert_eq!(rt.limits.max_body_bytes, 16 << 20);
        assert_eq!(rt.limits.header_timeout, Duration::from_secs(10));
        assert_eq!(rt.sites.len(), 1);
    }

    #[test]
    fn unknown_keys_are_errors_with_file_and_line() {
        let text = "listen = [\"127.0.0.1:1\"]\n[limits]\nheader_timout = \"1s\"\n";
        let e = from_str(text, "t.toml", Path::new("."), &Overrides::default()).unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("header_timout"), "{e}");
        assert!(e.to_string().starts_with("t.toml:3"), "{e}");
    }

    #[test]
    fn a_bad_duration_names_its_line() {
        let text = "[limits]\n\nkeepalive_timeout = \"15 parsecs\"\n";
        let e = from_str(text, "t.toml", Path::new("."), &Overrides::default()).unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("unknown unit"), "{e}");
    }

    #[test]
    fn a_missing_root_names_its_line_and_key() {
        let text = "[[site]]\nroot = \"/nonexistent/stoa/root\"\n";
        let e = from_str(text, "t.toml", Path::new("."), &Overrides::default()).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert_eq!(e.key, "site[0].root");
    }

    #[test]
    fn a_pool_command_starting_with_stoa_runs_the_running_binary() {
        let text = format!(
            "[[pool]]\nname = \"app\"\ncommand = [\"{{stoa}}\", \"demo-app\", \"comments\"]\n\
             [[pool]]\nname = \"other\"\ncommand = [\"bin/app\", \"{{stoa}}\"]\n\
             [[site]]\nroot = {:?}\n",
            std::env::temp_dir()
        );
        let rt = from_str(&text, "t.toml", Path::new("/base"), &Overrides::default()).unwrap();
        let command = |i: usize| match &rt.pool_specs[i].kind {
            crate::upstream::pool::PoolKind::Spawn { command, .. } => command.clone(),
            other => panic!("not spawned: {other:?}"),
        };
        let exe = std::env::current_exe().unwrap().display().to_string();
        assert_eq!(command(0), [exe.as_str(), "demo-app", "comments"]);
        // Only the program is expanded; elsewhere `{stoa}` is a plain word.
        assert_eq!(command(1), ["/base/bin/app", "{stoa}"]);
    }

    #[test]
    fn an_authorizer_naming_no_pool_is_an_error_with_its_line() {
        let dir = std::env::temp_dir();
        let text = format!(
            "[[pool]]\nname = \"app\"\naddress = [\"127.0.0.1:9000\"]\n[[site]]\nroot = {:?}\n[[site.route]]\nprefix = \"/a/\"\nfastcgi = {{ pool = \"app\" }}\nauthorizer = \"nope\"\n",
            dir.display().to_string()
        );
        let e = from_str(&text, "t.toml", Path::new("."), &Overrides::default()).unwrap_err();
        assert_eq!(e.line, Some(9), "{e}");
        assert_eq!(e.key, "site[0].route[0].authorizer");
        assert!(e.message.contains("no [[pool]] named `nope`"), "{e}");
        let ok = text.replace("\"nope\"", "\"app\"");
        assert!(from_str(&ok, "t.toml", Path::new("."), &Overrides::default()).is_ok());
    }

    #[test]
    fn a_status_route_with_a_bad_address_block_names_its_line() {
        let dir = std::env::temp_dir();
        let text = format!(
            "[[site]]\nroot = {:?}\n[[site.route]]\nprefix = \"/s\"\nstatus = {{ allow = [\"10.0.0.0/40\"] }}\n",
            dir.display().to_string()
        );
        let e = from_str(&text, "t.toml", Path::new("."), &Overrides::default()).unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        assert_eq!(e.key, "site[0].route[0].status.allow");
        assert!(e.message.contains("prefix longer than the address"), "{e}");
        let ok = text.replace("/40", "/8");
        assert!(from_str(&ok, "t.toml", Path::new("."), &Overrides::default()).is_ok());
    }

    #[test]
    fn a_bad_listen_address_names_its_line() {
        let d = dir();
        let text = format!(
            "listen = [\n  \"nowhere\"]\n[[site]]\nroot = \"{}\"\n",
            d.display()
        );
        let e = from_str(&text, "t.toml", Path::new("."), &Overrides::default()).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert_eq!(e.key, "listen");
    }

    #[test]
    fn split_at_ends_the_script_at_the_first_marker_followed_by_a_slash_or_the_end() {
        assert_eq!(split_at("/doku.php/wiki/start", ".php"), Some(9));
        assert_eq!(split_at("/doku.php", ".php"), Some(9));
        assert_eq!(split_at("/a.php.txt/x.php/y", ".php"), Some(16));
        assert_eq!(split_at("/X.PHP/y", ".php"), Some(6));
        assert_eq!(split_at("/x.phpx", ".php"), None);
        assert_eq!(split_at(".php", ".php"), None);
        assert!(Matcher::Suffix {
            suffix: ".php".into(),
            split: false
        }
        .matches("/A.Php"));
        assert!(!Matcher::Suffix {
            suffix: ".php".into(),
            split: false
        }
        .matches("/a.php/x"));
        assert!(Matcher::Suffix {
            suffix: ".php".into(),
            split: true
        }
        .matches("/a.php/x"));
    }

    /// The routing rule (docs/CONFIG.md, "Route order"): deny routes
    /// first, then suffix and regex routes in file order, then prefixes
    /// longest first.
    #[test]
    fn routes_sort_deny_first_then_suffixes_and_regexes_in_file_order_then_longest_prefix() {
        let d = dir();
        let text = format!(
            "[[site]]\nroot = \"{}\"\n\
             [[site.route]]\nprefix = \"/a/\"\nstatic = {{}}\n\
             [[site.route]]\nregex = '\\.y$'\nstatic = {{}}\n\
             [[site.route]]\nprefix = \"/a/b/\"\nstatic = {{}}\n\
             [[site.route]]\nsuffix = \".x\"\nstatic = {{}}\n\
             [[site.route]]\nregex = '^/z/'\ndeny = true\n\
             [[site.route]]\nprefix = \"/a/\"\ndeny = true\n",
            d.display()
        );
        let rt = from_str(&text, "t.toml", &d, &Overrides::default()).expect("valid");
        let kinds: Vec<String> = rt.sites[0]
            .routes
            .iter()
            .map(|r| match (&r.handler, &r.matcher) {
                (Handler::Deny, Matcher::Regex(re)) => format!("deny {re}"),
                (Handler::Deny, _) => "deny".to_owned(),
                (_, Matcher::Suffix { suffix, .. }) => suffix.clone(),
                (_, Matcher::Regex(re)) => re.as_str().to_owned(),
                (_, Matcher::Prefix(p)) => p.clone(),
            })
            .collect();
        assert_eq!(kinds, ["deny ^/z/", "deny", r"\.y$", ".x", "/a/b/", "/a/"]);
        // The deny route on /a/ leaves both /a/ static routes nothing.
        assert_eq!(
            rt.warnings,
            [
                "t.toml: site[0].route[2]: never used: every path it takes is taken first by site[0].route[5]",
                "t.toml: site[0].route[0]: never used: every path it takes is taken first by site[0].route[5]",
            ]
        );
    }

    #[test]
    fn a_bad_rewrite_or_try_files_names_its_key() {
        let d = dir();
        let root = d.display();
        for (body, key) in [
            (
                "[[site.rewrite]]\nfrom = \"(\"\nto = \"/x\"\n",
                "site[0].rewrite[0].from",
            ),
            (
                "[[site.rewrite]]\nfrom = \"x\"\nto = \"x\"\n",
                "site[0].rewrite[0].to",
            ),
            (
                "[[site.route]]\nprefix = \"/\"\nstatic = {}\ntry_files = [\"$uri\", \"oops\"]\n",
                "site[0].route[0].try_files",
            ),
            (
                "[[site.route]]\nsuffix = \".x\"\nalias = \"/tmp\"\n",
                "site[0].route[0].alias",
            ),
        ] {
            let text = format!("[[site]]\nroot = \"{root}\"\n{body}");
            let e = from_str(&text, "t.toml", &d, &Overrides::default()).expect_err(body);
            assert_eq!(e.key, key, "{e}");
        }
    }

    #[test]
    fn hsts_needs_max_age_and_known_directives_and_names_its_line() {
        let d = dir();
        let root = d.display();
        for (v, ok) in [
            ("max-age=31536000", true),
            ("max-age=0; includeSubDomains; preload", true),
            ("Max-Age=\\\"60\\\" ; includesubdomains", true),
            ("includeSubDomains", false),
            ("max-age=soon", false),
            ("max-age=1; max-age=2", false),
            ("max-age=1; report-uri=x", false),
        ] {
            let text = format!("[[site]]\nroot = \"{root}\"\n\nhsts = \"{v}\"\n");
            match from_str(&text, "t.toml", &d, &Overrides::default()) {
                Ok(rt) => {
                    assert!(ok, "{v} was accepted");
                    assert!(rt.transport_rules);
                    assert!(rt.sites[0].hsts.is_some());
                }
                Err(e) => {
                    assert!(!ok, "{v}: {e}");
                    assert_eq!((e.key.as_str(), e.line), ("site[0].hsts", Some(4)), "{e}");
                }
            }
        }
        let text = format!("[[site]]\nroot = \"{root}\"\n");
        let rt = from_str(&text, "t.toml", &d, &Overrides::default()).unwrap();
        assert!(!rt.transport_rules);
    }

    #[test]
    fn the_http2_table_defaults_to_hypers_limits_and_refuses_what_rfc9113_forbids() {
        let d = dir();
        let root = d.display();
        let rt = from_str(
            &format!("[[site]]\nroot = \"{root}\"\n"),
            "t.toml",
            &d,
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(rt.http2, Http2Limits::default());
        assert_eq!(rt.http2.initial_window_size, 1 << 20);
        assert_eq!(rt.http2.max_header_list_size, 16 << 10);
        let rt = from_str(
            &format!(
                "[http2]\nmax_concurrent_streams = 50\ninitial_window_size = \"64 KiB\"\n\
                 max_frame_size = \"1 MiB\"\nmax_control_frames = 0\n[[site]]\nroot = \"{root}\"\n"
            ),
            "t.toml",
            &d,
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(rt.http2.max_concurrent_streams, 50);
        assert_eq!(rt.http2.initial_window_size, 64 << 10);
        assert_eq!(rt.http2.max_frame_size, 1 << 20);
        assert_eq!(rt.http2.max_control_frames, 0);
        for (body, key) in [
            ("max_frame_size = 1000", "http2.max_frame_size"),
            ("max_frame_size = \"16 MiB\"", "http2.max_frame_size"),
            (
                "initial_window_size = \"2 GiB\"",
                "http2.initial_window_size",
            ),
            (
                "initial_connection_window_size = 1000",
                "http2.initial_connection_window_size",
            ),
            ("max_concurrent_streams = 0", "http2.max_concurrent_streams"),
        ] {
            let text = format!("[http2]\n{body}\n[[site]]\nroot = \"{root}\"\n");
            let e = from_str(&text, "t.toml", &d, &Overrides::default()).expect_err(body);
            assert_eq!(e.key, key, "{e}");
        }
        let e = from_str(
            "[http2]\nmax_streams = 1\n",
            "t.toml",
            &d,
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("max_streams"), "{e}");
    }

    #[test]
    fn client_auth_works_with_h3_on_an_address_of_its_own_and_is_refused_beside_other_blocks() {
        let d = dir();
        let root = d.display();
        // The first block's certificate serves as the CA file.
        let first = "[[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"a.pem\"\nkey = \"a.key\"\n\
                     self_signed = true\nhosts = [\"a.test\"]\nprotocols = [\"h3\", \"h2\"]\n";
        let second = "[[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"b.pem\"\nkey = \"b.key\"\n\
                      self_signed = true\nhosts = [\"b.test\"]\nclient_auth = { ca = \"a.pem\" }\n";
        let site = format!("[[site]]\nroot = \"{root}\"\n");
        let alone = format!("{first}client_auth = {{ ca = \"a.pem\" }}\n{site}");
        let rt = from_str(&alone, "t.toml", &d, &Overrides::default()).unwrap();
        assert_eq!(rt.h3.len(), 1);
        assert!(rt.tls[0].1.sites[0].clients.is_some());
        // QUIC's one TLS config per address cannot pick a verifier by SNI.
        let shared = format!("{first}{second}{site}");
        let e = from_str(&shared, "t.toml", &d, &Overrides::default()).unwrap_err();
        assert_eq!(e.key, "tls.client_auth", "{e}");
        assert!(e.message.contains("address of its own"), "{e}");
    }

    #[test]
    fn the_http3_table_defaults_and_h3_in_protocols_opens_quic_only_beside_a_tcp_protocol() {
        let d = dir();
        let root = d.display();
        let tls = |protocols: &str| {
            format!(
                "[[tls]]\nlisten = [\"127.0.0.1:0\"]\ncert = \"c.pem\"\nkey = \"k.pem\"\n\
                 self_signed = true\nprotocols = {protocols}\n[[site]]\nroot = \"{root}\"\n"
            )
        };
        let rt = from_str(
            &tls(r#"["h3", "h2", "http/1.1"]"#),
            "t.toml",
            &d,
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(rt.http3, Http3Limits::default());
        assert_eq!(rt.http3.retry, H3Retry::UnderLoad);
        assert_eq!(rt.h3.len(), 1);
        // The TCP handshake does not offer "h3": it is QUIC's.
        let (_, acceptor) = &rt.tls[0];
        assert!(acceptor.h3);
        assert_eq!(
            acceptor.sites[0].config.alpn_protocols,
            [b"h2".to_vec(), b"http/1.1".to_vec(), b"http/1.0".to_vec()]
        );
        let rt = from_str(&tls(r#"["h2"]"#), "t.toml", &d, &Overrides::default()).unwrap();
        assert!(rt.h3.is_empty());
        // Alone, nothing would ever advertise it (RFC 9114 §3.1.1).
        let e = from_str(&tls(r#"["h3"]"#), "t.toml", &d, &Overrides::default()).unwrap_err();
        assert_eq!(e.key, "tls.protocols", "{e}");
        for (body, key) in [
            ("early_data = true", "http3.early_data"),
            ("max_concurrent_streams = 0", "http3.max_concurrent_streams"),
            (
                "max_field_section_size = 10",
                "http3.max_field_section_size",
            ),
            ("retry = \"sometimes\"", "http3.retry"),
            ("max_handshakes = 0", "http3.max_handshakes"),
            ("max_datagram_size = 1199", "http3.max_datagram_size"),
            ("max_datagram_size = 65528", "http3.max_datagram_size"),
            (
                "qpack_max_table_capacity = \"2m\"",
                "http3.qpack_max_table_capacity",
            ),
            ("qpack_blocked_streams = 101", "http3.qpack_blocked_streams"),
        ] {
            let text = format!("[http3]\n{body}\n[[site]]\nroot = \"{root}\"\n");
            let e = from_str(&text, "t.toml", &d, &Overrides::default()).expect_err(body);
            assert_eq!(e.key, key, "{e}");
        }
        let text = format!(
            "[http3]\nmax_concurrent_streams = 7\nretry = \"always\"\nidle_timeout = \"5s\"\n\
             [[site]]\nroot = \"{root}\"\n"
        );
        let rt = from_str(&text, "t.toml", &d, &Overrides::default()).unwrap();
        assert_eq!(rt.http3.max_concurrent_streams, 7);
        assert_eq!(rt.http3.retry, H3Retry::Always);
        assert_eq!(rt.http3.idle_timeout, std::time::Duration::from_secs(5));
    }

    #[test]
    fn https_redirect_goes_to_the_first_tls_port_unless_one_is_443() {
        let d = dir();
        let (cert, key) = crate::cert::self_signed(&d.join("certs"), &[]).unwrap();
        let tls = |ports: &[u16]| {
            let mut t = String::new();
            for p in ports {
                t.push_str(&format!(
                    "[[tls]]\nlisten = [\"127.0.0.1:{p}\"]\ncert = {:?}\nkey = {:?}\n",
                    cert.display().to_string(),
                    key.display().to_string()
                ));
            }
            let text = format!(
                "{t}[[site]]\nroot = {:?}\nhttps_redirect = true\n",
                d.display().to_string()
            );
            from_str(&text, "t.toml", &d, &Overrides::default()).unwrap()
        };
        assert_eq!(tls(&[]).https_port, None);
        assert_eq!(tls(&[8443]).https_port, Some(8443));
        assert_eq!(tls(&[8443, 443]).https_port, None);
        assert!(tls(&[]).transport_rules);
    }

    #[test]
    fn host_patterns_match_exact_and_wildcard_names() {
        assert!(HostPattern::parse("*").matches("x"));
        assert!(HostPattern::parse("Example.com").matches("example.com"));
        assert!(!HostPattern::parse("example.com").matches("www.example.com"));
        assert!(HostPattern::parse("*.example.com").matches("www.example.com"));
        assert!(HostPattern::parse("*.example.com").matches("WWW.Example.COM"));
        assert!(HostPattern::parse("example.com").matches("EXAMPLE.com"));
        assert!(!HostPattern::parse("*.example.com").matches("example.com"));
    }
}
