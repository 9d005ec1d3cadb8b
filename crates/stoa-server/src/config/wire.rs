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

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(p: &str) -> PathBuf {
        std::path::Path::new("/etc/stoa").join(p)
    }

    fn spanned(s: &str) -> Spanned<String> {
        #[derive(Deserialize)]
        struct W {
            v: Spanned<String>,
        }
        let w: W = toml::from_str(&format!("v = {s:?}")).expect("toml");
        w.v
    }

    #[test]
    fn listen_takes_addresses_and_unix_paths_relative_to_the_config() {
        assert!(matches!(
            parse_listen("127.0.0.1:80", &resolve),
            Ok(Listen::Tcp(_))
        ));
        match parse_listen("unix:run/http.sock", &resolve) {
            Ok(Listen::Unix(p)) => assert_eq!(p, PathBuf::from("/etc/stoa/run/http.sock")),
            _ => panic!("not a unix path"),
        }
        assert!(parse_listen("unix:", &resolve).is_err());
    }

    #[test]
    fn unix_socket_mode_is_octal_and_owner_is_user_or_user_group() {
        let c = |mode: Option<&str>, owner: Option<&str>| UnixSocketConfig {
            mode: mode.map(str::to_owned),
            owner: owner.map(str::to_owned),
        };
        assert_eq!(
            unix_listen(vec![], &c(None, None)).map(|u| u.mode),
            Ok(0o666)
        );
        assert_eq!(
            unix_listen(vec![], &c(Some("0660"), None)).map(|u| u.mode),
            Ok(0o660)
        );
        assert!(unix_listen(vec![], &c(Some("0990"), None)).is_err());
        assert!(unix_listen(vec![], &c(Some("1777"), None)).is_err());
        let u = unix_listen(vec![], &c(None, Some("www-data:haproxy"))).expect("owner");
        assert_eq!(u.owner, Some(("www-data".into(), Some("haproxy".into()))));
        assert!(unix_listen(vec![], &c(None, Some("www-data:"))).is_err());
    }

    #[test]
    fn proxy_protocol_names_only_listened_addresses_and_needs_trusted_proxies() {
        let tcp: Vec<SocketAddr> = vec!["127.0.0.1:8080".parse().expect("addr")];
        let unix = vec![PathBuf::from("/run/s.sock")];
        let c = |listen: &[&str], trusted: &[&str]| ProxyProtocolConfig {
            listen: listen.iter().map(|s| spanned(s)).collect(),
            trusted_proxies: trusted.iter().map(|s| s.to_string()).collect(),
        };
        let p = proxy_protocol(
            &c(&["127.0.0.1:8080", "unix:/run/s.sock"], &["10.0.0.0/8"]),
            &tcp,
            &unix,
            &resolve,
        )
        .expect("valid");
        assert!(p.on_tcp(tcp[0]) && p.on_unix(&unix[0]));
        // Not an address Stoa listens on.
        assert!(
            proxy_protocol(&c(&["127.0.0.1:9"], &["10.0.0.0/8"]), &tcp, &unix, &resolve).is_err()
        );
        // A TCP listener with nobody trusted would refuse everyone.
        assert!(proxy_protocol(&c(&["127.0.0.1:8080"], &[]), &tcp, &unix, &resolve).is_err());
        // A Unix one alone needs no list: the file's mode decides.
        assert!(proxy_protocol(&c(&["unix:/run/s.sock"], &[]), &tcp, &unix, &resolve).is_ok());
        assert!(proxy_protocol(&c(&[], &["10.0.0.1/8"]), &tcp, &unix, &resolve).is_err());
    }
}
