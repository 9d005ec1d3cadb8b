//! TLS to an application server (an HTTP pool's `tls` key, or addresses
//! written `https://host:port`): the pool's rustls client configuration,
//! built once when the configuration is loaded (so `stoa check` reports a
//! missing CA or key file), with one session cache for all its
//! connections, and the connector both the proxy and the health checks
//! reach through [`Target::Tls`](super::Target::Tls).

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientSessionMemoryCache, Resumption, WebPkiServerVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use serde::Deserialize;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `tls = true` or `tls = { ... }` on a `[[pool]]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum TlsKey {
    On(bool),
    Table(TlsTable),
}

/// `tls = { ca, server_name, verify, client_cert, client_key }`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsTable {
    /// PEM file of the certificates that may sign the servers'
    /// (nginx `proxy_ssl_trusted_certificate`); without it, the system's.
    pub ca: Option<PathBuf>,
    /// The name sent (SNI) and verified (nginx `proxy_ssl_name`); without
    /// it, each address's host.
    pub server_name: Option<String>,
    /// `false`: any certificate is accepted (nginx `proxy_ssl_verify off`,
    /// its default; Caddy `tls_insecure_skip_verify`).
    pub verify: Option<bool>,
    /// Stoa's own certificate chain and key (PEM) for servers that ask
    /// for one (nginx `proxy_ssl_certificate`/`_key`).
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
}

/// Where a system keeps its trusted roots as one PEM bundle (the files
/// `openssl-probe`, and so `rustls-native-certs`, look for on Linux and
/// the BSDs); `SSL_CERT_FILE` first, as OpenSSL reads it.
const SYSTEM_BUNDLES: [&str; 5] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/usr/local/share/certs/ca-root-nss.crt",
];

/// A pool's client configuration. Two compare equal when they were built
/// from the same settings and the same file contents, so a reload that
/// changes neither keeps the pool (and its parked connections), and one
/// that changes a CA file gets a new one.
pub struct Connector {
    config: Arc<ClientConfig>,
    /// Everything it was built from: settings and file contents.
    source: Vec<Vec<u8>>,
    /// Whether certificates are verified (false is warned about at start).
    pub verify: bool,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Connector(verify: {})", self.verify)
    }
}

impl PartialEq for Connector {
    fn eq(&self, o: &Connector) -> bool {
        self.source == o.source
    }
}

impl Eq for Connector {}

/// One server reached over TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsTarget {
    pub addr: SocketAddr,
    /// Sent as SNI (a DNS name; an IP address is not sent) and verified.
    pub name: ServerName<'static>,
    /// `host:port` as written: the Host an upstream gets when the
    /// client's is not kept, as nginx sends `proxy_pass`'s host.
    pub authority: String,
    pub connector: Arc<Connector>,
}

impl std::fmt::Display for TlsTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.authority == self.addr.to_string() {
            write!(f, "https://{}", self.authority)
        } else {
            write!(f, "https://{} ({})", self.authority, self.addr)
        }
    }
}

/// An address written `https://host[:port]` (port 443 when left out):
/// its host and `host:port`, or None when it is not written so.
fn https_address(s: &str) -> Option<Result<(String, u16), String>> {
    let rest = s.strip_prefix("https://")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() || rest.contains('/') {
        return Some(Err(format!(
            "`{s}`: write \"https://host:port\" (no path: a route's `strip_prefix` and the \
             request's path make the target)"
        )));
    }
    let (host, port) = match rest.rfind(':') {
        // `[::1]:443`, `host:443`; a bare `[::1]` or `host` gets 443.
        Some(i) if !rest[i..].contains(']') => {
            let port = rest[i + 1..]
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("`{s}`: bad port"));
            match port {
                Ok(p) => (&rest[..i], p),
                Err(e) => return Some(Err(e)),
            }
        }
        _ => (rest, 443),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Some(Err(format!("`{s}`: no host")));
    }
    Some(Ok((host.to_owned(), port)))
}

/// A pool's addresses and `tls` key, taken apart: the addresses as the
/// plain TCP parser reads them (`https://` removed, a host name resolved
/// once, now, as nginx resolves `proxy_pass` hosts at load), and the TLS
/// to wrap them in, if any. [`apply`] wraps them once the pool's spec is
/// built.
pub(crate) struct Plan {
    connector: Arc<Connector>,
    /// Per address: the name to verify and the authority as written.
    names: Vec<(ServerName<'static>, String)>,
}

/// Reads the `tls` key and the addresses; returns the addresses to give
/// the TCP parser and the TLS plan (None: a plain pool, as before).
pub(crate) fn plan(
    address: Option<Vec<String>>,
    tls: Option<&TlsKey>,
    http: bool,
    base: &Path,
) -> Result<(Option<Vec<String>>, Option<Plan>), String> {
    let any_https = address.iter().flatten().any(|a| a.starts_with("https://"));
    let table = match tls {
        Some(TlsKey::On(false)) if any_https => {
            return Err("`tls = false` with an `https://` address".into())
        }
        Some(TlsKey::On(false)) => return Ok((address, None)),
        Some(TlsKey::On(true)) => Some(TlsTable::default()),
        Some(TlsKey::Table(t)) => Some(TlsTable {
            ca: t.ca.clone(),
            server_name: t.server_name.clone(),
            verify: t.verify,
            client_cert: t.client_cert.clone(),
            client_key: t.client_key.clone(),
        }),
        None if any_https => Some(TlsTable::default()),
        None => return Ok((address, None)),
    };
    let table = table.unwrap_or_default();
    if !http {
        return Err("`tls` and `https://` addresses are for `protocol = \"http\"` pools".into());
    }
    let Some(addrs) = address else {
        return Err(
            "`tls` is for pools of `address`es (a spawned process listens on a Unix \
                    socket)"
                .into(),
        );
    };
    let connector = Arc::new(connector(&table, base)?);
    let mut plain = Vec::with_capacity(addrs.len());
    let mut names = Vec::with_capacity(addrs.len());
    for a in &addrs {
        if a.starts_with("unix:") {
            return Err(format!("`{a}`: TLS is for TCP addresses"));
        }
        let (host, port) = match https_address(a) {
            Some(r) => r?,
            None => {
                // `127.0.0.1:8443` in a pool with a `tls` table.
                let sa = super::addr::parse_addr(a)?;
                (sa.ip().to_string(), sa.port())
            }
        };
        let ip = if host.eq_ignore_ascii_case("localhost") {
            Some(std::net::IpAddr::from([127, 0, 0, 1]))
        } else {
            host.parse::<std::net::IpAddr>().ok()
        };
        let sa = match ip {
            Some(ip) => SocketAddr::new(ip, port),
            None => resolve(&host, port)?,
        };
        let authority = match ip {
            Some(std::net::IpAddr::V6(_)) if host.contains(':') => format!("[{host}]:{port}"),
            _ => format!("{host}:{port}"),
        };
        let name = table.server_name.as_deref().unwrap_or(&host);
        let name = ServerName::try_from(name.to_owned())
            .map_err(|_| format!("`{name}` is not a server name (write a DNS name or address)"))?;
        plain.push(sa.to_string());
        names.push((name, authority));
    }
    Ok((Some(plain), Some(Plan { connector, names })))
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let mut all = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("`{host}`: cannot resolve: {e}"))?;
    all.next()
        .ok_or_else(|| format!("`{host}`: resolves to no address"))
}

/// Wraps the pool's TCP addresses (in the order [`plan`] returned them)
/// in TLS.
pub(crate) fn apply(kind: &mut super::PoolKind, plan: Plan) {
    if let super::PoolKind::Remote { addresses } = kind {
        for (t, (name, authority)) in addresses.iter_mut().zip(plan.names) {
            if let super::Target::Tcp(addr) = *t {
                *t = super::Target::Tls(Box::new(TlsTarget {
                    addr,
                    name,
                    authority,
                    connector: plan.connector.clone(),
                }));
            }
        }
    }
}

/// Whether any of a pool's servers is reached with verification off: the
/// pool's name is logged as a warning when it starts.
pub(crate) fn unverified(kind: &super::PoolKind) -> bool {
    matches!(kind, super::PoolKind::Remote { addresses }
        if addresses.iter().any(|t| matches!(t, super::Target::Tls(t) if !t.connector.verify)))
}

fn read(what: &str, p: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(p).map_err(|e| format!("{what} `{}`: cannot read: {e}", p.display()))
}

fn certs(what: &str, p: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{what} `{}`: {e:?}", p.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{what} `{}`: no PEM certificate in it",
            p.display()
        ));
    }
    Ok(certs)
}

/// Builds a pool's client configuration: TLS 1.3 and 1.2, ALPN
/// "http/1.1", one session cache (resumption with tickets or ids).
fn connector(t: &TlsTable, base: &Path) -> Result<Connector, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verify = t.verify.unwrap_or(true);
    let mut source = vec![
        vec![u8::from(verify)],
        t.server_name.clone().unwrap_or_default().into_bytes(),
    ];
    let mut roots = RootCertStore::empty();
    match &t.ca {
        Some(ca) => {
            let ca = base.join(ca);
            let pem = read("`ca`", &ca)?;
            let (ok, _) = roots.add_parsable_certificates(certs("`ca`", &ca, &pem)?);
            if ok == 0 {
                return Err(format!("`ca` `{}`: no usable certificate", ca.display()));
            }
            source.push(pem);
        }
        None if verify => {
            let from_env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
            let found = from_env
                .into_iter()
                .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    format!(
                        "no `ca` and no system CA bundle ({}): give `ca`",
                        SYSTEM_BUNDLES.join(", ")
                    )
                })?;
            let pem = read("system CA bundle", &found)?;
            roots.add_parsable_certificates(
                CertificateDer::pem_slice_iter(&pem).filter_map(Result::ok),
            );
            source.push(pem);
        }
        None => {}
    }
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = if verify {
        let v = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| format!("`ca`: {e}"))?;
        builder.with_webpki_verifier(v)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
    };
    let mut config = match (&t.client_cert, &t.client_key) {
        (Some(c), Some(k)) => {
            let (c, k) = (base.join(c), base.join(k));
            let cpem = read("`client_cert`", &c)?;
            let kpem = read("`client_key`", &k)?;
            let chain = certs("`client_cert`", &c, &cpem)?;
            let key = PrivateKeyDer::from_pem_slice(&kpem).map_err(|e| match e {
                rustls::pki_types::pem::Error::NoItemsFound => {
                    format!("`client_key` `{}`: no PEM private key in it", k.display())
                }
                e => format!("`client_key` `{}`: {e:?}", k.display()),
            })?;
            source.push(cpem);
            source.push(kpem);
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| match e {
                    rustls::Error::InconsistentKeys(_) => format!(
                        "`client_key` `{}` is not the key of `client_cert` `{}`",
                        k.display(),
                        c.display()
                    ),
                    e => format!("`client_cert`/`client_key`: {e}"),
                })?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => return Err("give both `client_cert` and `client_key`".into()),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // One cache for the pool's connections from every worker: a new
    // connection resumes (no certificate sent or verified again).
    config.resumption = Resumption::store(Arc::new(ClientSessionMemoryCache::new(256)));
    Ok(Connector {
        config: Arc::new(config),
        source,
        verify,
    })
}

/// `verify = false`: any certificate, but the handshake's signatures are
/// still checked (the peer holds the key of the certificate it sent).
#[derive(Debug)]
struct AnyCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The protocol asked for in the handshake (ALPN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    Http1,
    H2,
}

/// A client TLS stream over a TCP socket that can be moved to another
/// worker's event loop while parked ([`TcpSlot::rebind`]).
pub type ClientStream = tokio_rustls::client::TlsStream<TcpSlot>;

/// Connects to `t` and completes the handshake, both within `limit` (as
/// nginx's `proxy_connect_timeout` covers its SSL handshake). A refused
/// certificate comes back as an error that says why, naming the server.
pub(crate) async fn connect(
    t: &TlsTarget,
    limit: Duration,
    alpn: Alpn,
) -> io::Result<ClientStream> {
    let c = async {
        let tcp = tokio::net::TcpStream::connect(t.addr).await?;
        let _ = tcp.set_nodelay(true);
        let connector = tokio_rustls::TlsConnector::from(t.connector.config.clone());
        let slot = TcpSlot(Some(tcp));
        let hs = match alpn {
            Alpn::Http1 => connector.connect(t.name.clone(), slot).await,
            Alpn::H2 => {
                connector
                    .with_alpn(vec![b"h2".to_vec()])
                    .connect(t.name.clone(), slot)
                    .await
            }
        };
        hs.map_err(|e| handshake_error(t, e))
    };
    tokio::time::timeout(limit, c).await.unwrap_or_else(|_| {
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "connect (TCP and TLS handshake) timed out",
        ))
    })
}

/// "TLS handshake with app.internal (127.0.0.1:8443): certificate verify
/// failed: UnknownIssuer": the rustls error by its name, as operators
/// search for it.
fn handshake_error(t: &TlsTarget, e: io::Error) -> io::Error {
    let why = match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidCertificate(c)) => match c {
            rustls::CertificateError::NotValidForNameContext {
                expected,
                presented,
            } => format!(
                "certificate verify failed: NotValidForName (expected {}, the certificate \
                 names {})",
                expected.to_str(),
                presented.join(", ")
            ),
            c => format!("certificate verify failed: {c:?}"),
        },
        Some(rustls::Error::AlertReceived(a)) => format!("the server refused: alert {a:?}"),
        Some(r) => format!("{r}"),
        None => format!("{e}"),
    };
    let name = t.name.to_str();
    io::Error::new(
        e.kind(),
        format!("TLS handshake with {name} ({}): {why}", t.addr),
    )
}

/// Reads, first sending what earlier writes left encrypted in the
/// session: tokio-rustls accepts a write once rustls has it, and sends the
/// records only as far as the socket takes them then; the rest waits for a
/// flush the HTTP/1 exchange (written for plain sockets) does not make
/// before it waits for the response. A connection just moved to this
/// worker has no write readiness yet, so its request would wait forever.
pub(crate) fn poll_read(
    s: &mut ClientStream,
    cx: &mut std::task::Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> std::task::Poll<io::Result<()>> {
    if s.get_ref().1.wants_write() {
        if let std::task::Poll::Ready(Err(e)) = std::pin::Pin::new(&mut *s).poll_flush(cx) {
            return std::task::Poll::Ready(Err(e));
        }
    }
    std::pin::Pin::new(s).poll_read(cx, buf)
}

/// Writes, and sends at once what the socket takes (see [`poll_read`]);
/// what it does not take goes on the next read, write or flush.
pub(crate) fn poll_write(
    s: &mut ClientStream,
    cx: &mut std::task::Context<'_>,
    buf: &[u8],
) -> std::task::Poll<io::Result<usize>> {
    let n = match std::pin::Pin::new(&mut *s).poll_write(cx, buf) {
        std::task::Poll::Ready(Ok(n)) => n,
        other => return other,
    };
    if s.get_ref().1.wants_write() {
        // An error here comes back on the next call; `n` bytes were taken.
        let _ = std::pin::Pin::new(&mut *s).poll_flush(cx);
    }
    std::task::Poll::Ready(Ok(n))
}

/// The TCP socket under a TLS stream, in a slot it can be taken out of
/// and put back into: a parked connection adopted by another worker is
/// deregistered from the old event loop and registered with the new one
/// while its TLS session stays as it is (tokio-rustls gives no way to
/// build a stream from a socket and a session).
#[derive(Debug)]
pub struct TcpSlot(Option<tokio::net::TcpStream>);

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "socket moved")
}

impl TcpSlot {
    pub(crate) fn tcp(&self) -> Option<&tokio::net::TcpStream> {
        self.0.as_ref()
    }

    /// Moves the socket into the calling worker's event loop.
    pub(crate) fn rebind(&mut self) -> io::Result<()> {
        let tcp = self.0.take().ok_or_else(gone)?;
        self.0 = Some(tokio::net::TcpStream::from_std(tcp.into_std()?)?);
        Ok(())
    }
}

impl AsyncRead for TcpSlot {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut().0.as_mut() {
            Some(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            None => std::task::Poll::Ready(Err(gone())),
        }
    }
}

impl AsyncWrite for TcpSlot {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        match self.get_mut().0.as_mut() {
            Some(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            None => std::task::Poll::Ready(Err(gone())),
        }
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        match self.get_mut().0.as_mut() {
            Some(s) => std::pin::Pin::new(s).poll_write_vectored(cx, bufs),
            None => std::task::Poll::Ready(Err(gone())),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut().0.as_mut() {
            Some(s) => std::pin::Pin::new(s).poll_flush(cx),
            None => std::task::Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match self.get_mut().0.as_mut() {
            Some(s) => std::pin::Pin::new(s).poll_shutdown(cx),
            None => std::task::Poll::Ready(Ok(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_addresses_parse_with_and_without_a_port() {
        assert_eq!(
            https_address("https://app.internal:8443"),
            Some(Ok(("app.internal".into(), 8443)))
        );
        assert_eq!(
            https_address("https://app.internal"),
            Some(Ok(("app.internal".into(), 443)))
        );
        assert_eq!(
            https_address("https://[::1]:8443/"),
            Some(Ok(("::1".into(), 8443)))
        );
        assert_eq!(
            https_address("https://[::1]"),
            Some(Ok(("::1".into(), 443)))
        );
        assert_eq!(https_address("127.0.0.1:8443"), None);
        assert!(matches!(https_address("https://a:0"), Some(Err(_))));
        assert!(matches!(https_address("https://a:1/x"), Some(Err(_))));
    }

    #[test]
    fn an_https_address_means_tls_with_the_name_from_the_address() {
        let r = plan(
            Some(vec!["https://localhost:8443".into()]),
            None,
            true,
            Path::new("/"),
        );
        if !SYSTEM_BUNDLES.iter().any(|p| Path::new(p).is_file())
            && std::env::var_os("SSL_CERT_FILE").is_none()
        {
            // No system roots here (no ca-certificates): said so plainly.
            assert!(r.err().is_some_and(|e| e.contains("give `ca`")));
            return;
        }
        let (plain, plan) = r.expect("plan");
        assert_eq!(plain, Some(vec!["127.0.0.1:8443".to_owned()]));
        let plan = plan.expect("tls");
        assert_eq!(plan.names[0].0.to_str(), "localhost");
        assert_eq!(plan.names[0].1, "localhost:8443");
    }

    /// A parked TLS connection is taken by a worker with another event
    /// loop (a thread with its own runtime here) and carries a request
    /// there; once the server has sent its close_notify, and before
    /// anyone reads it, the connection no longer looks open (a request
    /// that cannot be sent again must not go on it).
    #[test]
    fn a_parked_tls_connection_moves_to_another_event_loop_and_a_close_notify_closes_it() {
        use std::io::{BufRead, Write};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = std::env::temp_dir().join(format!("stoa-tls-move-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = p.self_signed(&ca_key).expect("ca");
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write");
        let key = rcgen::KeyPair::generate().expect("key");
        let leaf = rcgen::CertificateParams::new(vec!["app.test".to_owned()])
            .expect("params")
            .signed_by(&key, &ca, &ca_key)
            .expect("leaf");
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::try_from(key.serialize_der()).expect("key der"),
        )
        .expect("server config");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        // A blocking server: "ping" -> "pong"; "bye" -> close_notify, the
        // socket kept open until the test ends.
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let Ok((tcp, _)) = listener.accept() else {
                return;
            };
            let Ok(conn) = rustls::ServerConnection::new(Arc::new(server)) else {
                return;
            };
            let mut s = std::io::BufReader::new(rustls::StreamOwned::new(conn, tcp));
            let mut line = String::new();
            while s.read_line(&mut line).is_ok_and(|n| n > 0) {
                let s = s.get_mut();
                if line == "bye\n" {
                    s.conn.send_close_notify();
                    let _ = s.flush();
                    let _ = done_rx.recv_timeout(Duration::from_secs(10));
                    return;
                }
                let _ = s.write_all(b"pong\n");
                line.clear();
            }
        });
        let t = TlsKey::Table(TlsTable {
            ca: Some("ca.pem".into()),
            server_name: Some("app.test".into()),
            ..TlsTable::default()
        });
        let (plain, plan) = plan(Some(vec![addr.to_string()]), Some(&t), true, &dir).expect("plan");
        let mut kind = super::super::PoolKind::Remote {
            addresses: vec![
                super::super::Target::parse(&plain.expect("addrs")[0], &dir).expect("addr")
            ],
        };
        apply(&mut kind, plan.expect("tls"));
        let super::super::PoolKind::Remote { addresses } = kind else {
            unreachable!("a remote pool")
        };
        let target = addresses[0].clone();
        let rt = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
        };
        async fn ping(s: &mut AppStream) -> Vec<u8> {
            s.write_all(b"ping\n").await.expect("write");
            let mut got = vec![0u8; 5];
            s.read_exact(&mut got).await.expect("read");
            got
        }
        use super::super::stream::AppStream;
        let first = rt();
        let parked = first.block_on(async {
            let mut s = AppStream::connect(&target, Duration::from_secs(5))
                .await
                .expect("connect");
            assert_eq!(s.alpn(), None, "the server offers no ALPN");
            assert_eq!(ping(&mut s).await, b"pong\n");
            super::super::pool::IdleConn::new(s, usize::MAX)
        });
        let moved = std::thread::spawn(move || {
            rt().block_on(async {
                let mut s = AppStream::from_idle(parked).expect("adopt");
                assert_eq!(ping(&mut s).await, b"pong\n");
                assert!(s.looks_open());
                s.write_all(b"bye\n").await.expect("write");
                let deadline = std::time::Instant::now() + Duration::from_secs(5);
                while s.looks_open() && std::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                s.looks_open()
            })
        })
        .join()
        .expect("the other event loop");
        assert!(
            !moved,
            "a connection with a close_notify waiting looked open"
        );
        let _ = done_tx.send(());
        drop(first);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// ALPN (RFC 7301): a pool's connections offer "http/1.1"; an HTTP/2
    /// upstream asks for "h2" (RFC 9113 §3.2) and learns what the server
    /// chose.
    #[test]
    fn connections_offer_http_1_1_and_an_http2_upstream_gets_h2_by_alpn() {
        use tokio::io::AsyncReadExt;
        let dir = std::env::temp_dir().join(format!("stoa-tls-alpn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["app.test".to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        let mut server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::try_from(key.serialize_der()).expect("key der"),
        )
        .expect("server config");
        server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let server = Arc::new(server);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            for _ in 0..2 {
                let Ok((tcp, _)) = listener.accept() else {
                    return;
                };
                let Ok(conn) = rustls::ServerConnection::new(server.clone()) else {
                    return;
                };
                let mut s = rustls::StreamOwned::new(conn, tcp);
                // The handshake, then a clean close.
                let _ = std::io::Write::flush(&mut s);
                while s.conn.is_handshaking() {
                    if s.conn.complete_io(&mut s.sock).is_err() {
                        break;
                    }
                }
                s.conn.send_close_notify();
                let _ = s.conn.complete_io(&mut s.sock);
            }
        });
        let t = TlsKey::Table(TlsTable {
            verify: Some(false),
            server_name: Some("app.test".into()),
            ..TlsTable::default()
        });
        let (plain, plan) = plan(Some(vec![addr.to_string()]), Some(&t), true, &dir).expect("plan");
        let mut kind = super::super::PoolKind::Remote {
            addresses: vec![
                super::super::Target::parse(&plain.expect("addrs")[0], &dir).expect("addr")
            ],
        };
        apply(&mut kind, plan.expect("tls"));
        let super::super::PoolKind::Remote { addresses } = kind else {
            unreachable!("a remote pool")
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        use super::super::stream::AppStream;
        let limit = Duration::from_secs(5);
        rt.block_on(async {
            let mut s = AppStream::connect(&addresses[0], limit)
                .await
                .expect("connect");
            assert_eq!(s.alpn(), Some(&b"http/1.1"[..]));
            let _ = s.read(&mut [0u8; 1]).await;
            let mut s = AppStream::connect_alpn(&addresses[0], limit, Alpn::H2)
                .await
                .expect("connect h2");
            assert_eq!(s.alpn(), Some(&b"h2"[..]));
            let _ = s.read(&mut [0u8; 1]).await;
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A reload keeps a pool whose spec compares equal: the same settings
    /// and the same CA bytes; a CA file rewritten in place makes it new.
    #[test]
    fn a_pools_tls_compares_equal_until_a_setting_or_a_files_contents_change() {
        let dir = std::env::temp_dir().join(format!("stoa-tls-eq-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let ca = |cn: &str| {
            let key = rcgen::KeyPair::generate().expect("key");
            let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
            p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            p.distinguished_name.push(rcgen::DnType::CommonName, cn);
            std::fs::write(dir.join("ca.pem"), p.self_signed(&key).expect("ca").pem())
                .expect("write");
        };
        let build = |name: &str| {
            let t = TlsKey::Table(TlsTable {
                ca: Some("ca.pem".into()),
                server_name: Some(name.into()),
                ..TlsTable::default()
            });
            let (_, plan) =
                plan(Some(vec!["127.0.0.1:1".into()]), Some(&t), true, &dir).expect("plan");
            plan.expect("tls").connector
        };
        ca("one");
        let (a, b) = (build("app.test"), build("app.test"));
        assert_eq!(a, b);
        assert_ne!(a, build("other.test"));
        ca("two");
        assert_ne!(a, build("app.test"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tls_is_refused_on_fastcgi_pools_with_a_missing_ca_file_and_with_a_key_not_of_its_certificate(
    ) {
        let t = TlsKey::On(true);
        assert!(plan(
            Some(vec!["127.0.0.1:1".into()]),
            Some(&t),
            false,
            Path::new("/")
        )
        .err()
        .is_some_and(|e| e.contains("protocol = \"http\"")));
        let t = TlsKey::Table(TlsTable {
            ca: Some("no-such-ca.pem".into()),
            ..TlsTable::default()
        });
        assert!(plan(
            Some(vec!["127.0.0.1:1".into()]),
            Some(&t),
            true,
            Path::new("/")
        )
        .err()
        .is_some_and(|e| e.contains("no-such-ca.pem") && e.contains("cannot read")));
        // nginx -t: "key values mismatch" for a certificate and a key
        // that do not belong together; a file with no key in it.
        let dir = std::env::temp_dir().join(format!("stoa-tls-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let key = rcgen::KeyPair::generate().expect("key");
        let other = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["stoa.test".to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        std::fs::write(dir.join("c.pem"), cert.pem()).expect("write");
        std::fs::write(dir.join("other.key"), other.serialize_pem()).expect("write");
        std::fs::write(dir.join("empty.key"), "not a key\n").expect("write");
        for (k, says) in [
            ("other.key", "is not the key of"),
            ("empty.key", "no PEM private key"),
        ] {
            let t = TlsKey::Table(TlsTable {
                client_cert: Some("c.pem".into()),
                client_key: Some(k.into()),
                verify: Some(false),
                ..TlsTable::default()
            });
            let e = plan(Some(vec!["127.0.0.1:1".into()]), Some(&t), true, &dir).err();
            assert!(e.as_deref().is_some_and(|e| e.contains(says)), "{k}: {e:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
        let t = TlsKey::Table(TlsTable {
            client_cert: Some("c.pem".into()),
            verify: Some(false),
            ..TlsTable::default()
        });
        assert!(plan(
            Some(vec!["127.0.0.1:1".into()]),
            Some(&t),
            true,
            Path::new("/")
        )
        .err()
        .is_some_and(|e| e.contains("both")));
    }
}
