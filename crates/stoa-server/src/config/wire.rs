//! What the listeners carry besides HTTP: Unix-domain socket listeners
//! (`listen = ["unix:/run/stoa/http.sock"]`, `[unix_socket]`) and the
//! PROXY protocol from a load balancer in front (`[proxy_protocol]`).

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use stoa_h1::proxy::TrustedProxies;
use toml::Spanned;

/// `[proxy_protocol]`: addresses whose connections begin with a PROXY
/// protocol header (v1 or v2), and who may send one.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ProxyProtocolConfig {
    /// Addresses, from `listen` or a `[[tls]]` block's `listen`
    /// (`"unix:PATH"` too), that expect the header.
    #[serde(default)]
    pub listen: Vec<Spanned<String>>,
    /// Who may send it: addresses and ranges (`"10.0.0.0/8"`). A
    /// connection from anywhere else is closed. Unix-socket connections
    /// are trusted: the socket file's mode and owner decide who connects.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
}

/// `[unix_socket]`: the files of `unix:` listeners.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct UnixSocketConfig {
    /// Permission bits, octal in a string (`"0660"`); default `"0666"`
    /// (anyone may connect), as nginx makes its Unix sockets.
    pub mode: Option<String>,
    /// `"user"` or `"user:group"` to own the file (needs root at start);
    /// default the user Stoa is started as.
    pub owner: Option<String>,
}

/// The PROXY protocol as the workers use it.
#[derive(Debug, Clone, Default)]
pub struct ProxyProtocol {
    /// TCP addresses (as configured) that expect the header.
    pub tcp: Vec<SocketAddr>,
    /// Unix listeners that expect it.
    pub unix: Vec<PathBuf>,
    pub trusted: TrustedProxies,
}

impl ProxyProtocol {
    /// Whether a TCP listener configured as `addr` expects the header.
    pub fn on_tcp(&self, addr: SocketAddr) -> bool {
        self.tcp.contains(&addr)
    }

    pub fn on_unix(&self, path: &std::path::Path) -> bool {
        self.unix.iter().any(|p| p == path)
    }
}

/// The files of `unix:` listeners: where, with which mode and owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixListen {
    pub paths: Vec<PathBuf>,
    pub mode: u32,
    /// User and group names, looked up at start (by the server, which
    /// knows about accounts).
    pub owner: Option<(String, Option<String>)>,
}

/// A `listen` entry: a TCP address or a Unix socket's path.
pub enum Listen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// Parses one `listen` entry; `resolve` makes a relative path relative to
/// the configuration file.
pub fn parse_listen(s: &str, resolve: &dyn Fn(&str) -> PathBuf) -> Result<Listen, String> {
    match s.strip_prefix("unix:") {
        Some("") => Err(format!("`{s}`: no path after `unix:`")),
        Some(p) => Ok(Listen::Unix(resolve(p))),
        None => super::parse_addr(s).map(Listen::Tcp),
    }
}

/// `[unix_socket]` as the server uses it.
pub fn unix_listen(
    paths: Vec<PathBuf>,
    c: &UnixSocketConfig,
) -> Result<UnixListen, (String, String)> {
    let mode = match &c.mode {
        None => 0o666,
        Some(m) => u32::from_str_radix(m.trim_start_matches("0o"), 8)
            .ok()
            .filter(|m| *m <= 0o777)
            .ok_or_else(|| {
                (
                    "unix_socket.mode".to_owned(),
                    format!("`{m}` is not an octal mode such as \"0660\""),
                )
            })?,
    };
    let owner = match &c.owner {
        None => None,
        Some(o) => {
            let (u, g) = match o.split_once(':') {
                Some((u, g)) => (u, Some(g)),
                None => (o.as_str(), None),
            };
            if u.is_empty() || g.is_some_and(str::is_empty) {
                return Err((
                    "unix_socket.owner".to_owned(),
                    format!("`{o}`: write \"user\" or \"user:group\""),
                ));
            }
            Some((u.to_owned(), g.map(str::to_owned)))
        }
    };
    Ok(UnixListen { paths, mode, owner })
}

/// `[proxy_protocol]` checked against the listeners: every address it
/// names must be one Stoa listens on, and someone must be trusted.
pub fn proxy_protocol(
    c: &ProxyProtocolConfig,
    tcp: &[SocketAddr],
    unix: &[PathBuf],
    resolve: &dyn Fn(&str) -> PathBuf,
) -> Result<ProxyProtocol, (Option<std::ops::Range<usize>>, String, String)> {
    let mut out = ProxyProtocol {
        trusted: TrustedProxies::parse(c.trusted_proxies.iter().map(String::as_str)).map_err(
            |e| {
                (
                    None,
                    "proxy_protocol.trusted_proxies".to_owned(),
                    e.to_string(),
                )
            },
        )?,
        ..Default::default()
    };
    for l in &c.listen {
        let key = "proxy_protocol.listen".to_owned();
        match parse_listen(l.get_ref(), resolve).map_err(|m| (Some(l.span()), key.clone(), m))? {
            Listen::Tcp(a) if tcp.contains(&a) => out.tcp.push(a),
            Listen::Unix(p) if unix.contains(&p) => out.unix.push(p),
            _ => {
                return Err((
                    Some(l.span()),
                    key,
                    format!("`{}` is not an address Stoa listens on", l.get_ref()),
                ))
            }
        }
    }
    if !out.tcp.is_empty() && out.trusted.is_empty() {
        return Err((
            None,
            "proxy_protocol.trusted_proxies".to_owned(),
            "is empty: name the load balancers allowed to send the header".to_owned(),
        ));
    }
    Ok(out)
}
