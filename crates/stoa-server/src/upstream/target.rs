//! Where an application process is reached: a Unix socket or a TCP
//! address. A leaf of the upstream layer: the pool and the streams name
//! it, it names neither.

pub use super::addr::parse_addr;
use std::net::SocketAddr;
use std::path::Path;
use std::path::PathBuf;

/// How to reach one application process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Unix(PathBuf),
    Tcp(SocketAddr),
    /// TLS over TCP (`upstream/tls.rs`).
    Tls(Box<super::tls::TlsTarget>),
}

impl Target {
    pub fn parse(s: &str, base: &Path) -> Result<Target, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            let p = Path::new(p);
            return Ok(Target::Unix(if p.is_absolute() {
                p.to_path_buf()
            } else {
                base.join(p)
            }));
        }
        parse_addr(s).map(Target::Tcp)
    }
}

/// As the configuration writes it: `127.0.0.1:8080`, `unix:/run/app.sock`.
impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tcp(a) => write!(f, "{a}"),
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
            Target::Tls(t) => write!(f, "{t}"),
        }
    }
}
