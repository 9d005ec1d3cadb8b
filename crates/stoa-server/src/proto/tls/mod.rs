//! TLS termination with rustls (ring provider): certificates and keys
//! loaded from PEM files, one `ServerConfig` per `[[tls]]` block, chosen
//! by the client's SNI name when several blocks share an address, ALPN,
//! and session resumption shared by every worker.
//!
//! Resumption: TLS 1.3 tickets (and TLS 1.2 ones) are sealed by one
//! `Ticketer` for the whole process, whose key rotates every 6 hours
//! (rustls keeps the previous key to open older tickets); TLS 1.2
//! session ids go to one shared in-memory cache. Both outlive reloads, so
//! a SIGHUP does not cost every client a full handshake. A block with
//! `session_ticket_keys` seals with keys from files instead
//! (`tickets.rs`), so that several instances resume each other's
//! sessions; one with `ocsp_stapling` gets OCSP answers put on its
//! `CertSlot` (`ocsp.rs`).

mod der;
pub(crate) mod ocsp;
pub(crate) mod tickets;

pub mod client;

pub(crate) mod alpn;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{
    ClientHello, ResolvesServerCert, ServerConfig, ServerSessionMemoryCache, StoresServerSessions,
};
use rustls::sign::CertifiedKey;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};
use tokio_rustls::server::TlsStream;
use tokio_rustls::LazyConfigAcceptor;

/// ALPN names Stoa speaks.
pub const PROTOCOLS: [&str; 2] = ["h2", "http/1.1"];

/// HTTP/3's ALPN name (RFC 9114 §3.1), spoken over QUIC on the UDP side
/// of a TLS address.
pub const H3: &str = "h3";

/// One `[[tls]]` block, loaded: the names it serves and its config.
#[derive(Clone)]
pub struct TlsSite {
    /// SNI names (lower case; `*.example.com` matches one label). Empty:
    /// any name.
    pub hosts: Vec<String>,
    pub cert: PathBuf,
    pub config: Arc<ServerConfig>,
    /// The certificate this block serves now; replaced in place (a
    /// renewed certificate, a fresh OCSP answer) without a reload.
    pub slot: Arc<CertSlot>,
    /// `client_auth`'s verifier, which also checks a resumed session's
    /// client again (`client::recheck`).
    pub clients: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
}

/// The certificate of one `[[tls]]` block, as rustls' resolver: every
/// handshake takes the current one, and whoever renews it swaps it in.
/// Handshakes in progress keep the one they took.
pub struct CertSlot {
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertSlot {
    pub fn new(key: CertifiedKey) -> Arc<CertSlot> {
        Arc::new(CertSlot {
            current: RwLock::new(Arc::new(key)),
        })
    }

    /// The certificate served now.
    pub fn get(&self) -> Arc<CertifiedKey> {
        // A poisoned lock still holds a whole Arc: a writer cannot leave
        // it half-written.
        match self.current.read() {
            Ok(k) => k.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Serves `key` from the next handshake on.
    pub fn set(&self, key: CertifiedKey) {
        let key = Arc::new(key);
        match self.current.write() {
            Ok(mut k) => *k = key,
            Err(p) => *p.into_inner() = key,
        }
    }
}

impl std::fmt::Debug for CertSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertSlot").finish_non_exhaustive()
    }
}

impl ResolvesServerCert for CertSlot {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.get())
    }
}

impl std::fmt::Debug for TlsSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSite")
            .field("hosts", &self.hosts)
            .field("cert", &self.cert)
            .finish()
    }
}

/// The TLS side of one listening address: its blocks in file order; the
/// first answers clients whose SNI name no block lists (or who send none).
#[derive(Debug, Clone)]
pub struct Acceptor {
    pub sites: Vec<TlsSite>,
    /// A block on this address names "h3": QUIC on its UDP port too.
    pub h3: bool,
}

/// The certificate of the block the client's SNI name picks, as
/// [`Acceptor`] picks it for TCP: QUIC's handshake runs inside quinn, so
/// the choice is a resolver here.
#[derive(Debug)]
struct BySni(Vec<(Vec<String>, Arc<CertSlot>)>);

impl ResolvesServerCert for BySni {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if let Some(name) = hello.server_name() {
            let name = name.to_ascii_lowercase();
            let hit = self
                .0
                .iter()
                .find(|(hosts, _)| hosts.iter().any(|h| name_matches(h, &name)));
            if let Some((_, slot)) = hit {
                return Some(slot.get());
            }
        }
        self.0.first().map(|(_, slot)| slot.get())
    }
}

impl Acceptor {
    /// The rustls config of this address's QUIC side: TLS 1.3 only (RFC
    /// 9001 §4.2), ALPN "h3" alone, the blocks' certificates by SNI,
    /// clients verified as on TCP (`client_auth`: the config loader lets a
    /// block with it be the only one on an "h3" address, since rustls
    /// takes one verifier per config and does not choose it by SNI),
    /// tickets sealed as on TCP, and no early data: 0-RTT requests can be
    /// replayed (RFC 9001 §9.2).
    pub(crate) fn quic_config(&self) -> Result<ServerConfig, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let slots = self
            .sites
            .iter()
            .map(|s| (s.hosts.clone(), s.slot.clone()))
            .collect();
        let clients = self
            .sites
            .iter()
            .find_map(|s| s.clients.clone())
            .unwrap_or_else(rustls::server::WebPkiClientVerifier::no_client_auth);
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| format!("TLS: {e}"))?
            .with_client_cert_verifier(clients)
            .with_cert_resolver(Arc::new(BySni(slots)));
        config.alpn_protocols = vec![H3.as_bytes().to_vec()];
        config.ticketer = ticketer()?;
        config.session_storage = session_cache();
        config.send_tls13_tickets = 2;
        config.max_early_data_size = 0;
        Ok(config)
    }

    fn pick(&self, sni: Option<&str>) -> Option<&TlsSite> {
        if let Some(name) = sni {
            let name = name.to_ascii_lowercase();
            let hit = self
                .sites
                .iter()
                .find(|s| s.hosts.iter().any(|h| name_matches(h, &name)));
            if hit.is_some() {
                return hit;
            }
        }
        self.sites.first()
    }

    /// Runs the handshake on an accepted socket, by `deadline`. Returns the
    /// stream and whether ALPN chose HTTP/2.
    pub async fn accept(
        &self,
        tcp: TcpStream,
        deadline: Instant,
    ) -> io::Result<(TlsStream<TcpStream>, bool)> {
        let lazy = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), tcp);
        let start = timeout_at(deadline, lazy)
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
        let hello = start.client_hello();
        if let Some(key) = alpn::for_hello(hello.server_name(), hello.alpn()) {
            // An ACME validator (RFC 8737 §3): the challenge certificate,
            // then the connection ends.
            let config = alpn::config(key).map_err(io::Error::other)?;
            let stream = timeout_at(deadline, start.into_stream(config))
                .await
                .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
            drop(stream);
            return Err(io::Error::other("acme-tls/1 challenge answered"));
        }
        let site = self
            .pick(hello.server_name())
            .ok_or_else(|| io::Error::other("no certificate"))?;
        let config = site.config.clone();
        let stream = timeout_at(deadline, start.into_stream(config))
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
        if let Some(v) = &site.clients {
            client::recheck(v.as_ref(), stream.get_ref().1).map_err(io::Error::other)?;
        }
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
        Ok((stream, h2))
    }
}

/// `*.example.com` matches `a.example.com`, not `example.com` nor
/// `a.b.example.com` (RFC 6125 §6.4.3).
fn name_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(rest) => name
            .split_once('.')
            .is_some_and(|(label, tail)| !label.is_empty() && tail == rest),
        None => pattern == name,
    }
}

/// The process's ticket sealer, shared by every worker and reload.
fn ticketer() -> Result<Arc<dyn rustls::server::ProducesTickets>, String> {
    static T: OnceLock<Result<Arc<dyn rustls::server::ProducesTickets>, String>> = OnceLock::new();
    T.get_or_init(|| {
        rustls::crypto::ring::Ticketer::new().map_err(|e| format!("TLS session tickets: {e}"))
    })
    .clone()
}

fn session_cache() -> Arc<dyn StoresServerSessions> {
    static C: OnceLock<Arc<dyn StoresServerSessions>> = OnceLock::new();
    C.get_or_init(|| ServerSessionMemoryCache::new(4096))
        .clone()
}

/// Builds a server config offering `protocols` by ALPN from a PEM
/// certificate chain and key, read by the caller (the config loader,
/// which may have them from the privileged parent), and the slot that
/// holds its certificate. Errors name the file at fault.
pub fn load(
    cert: &Path,
    cert_pem: &[u8],
    key: &Path,
    key_pem: &[u8],
    protocols: &[String],
) -> Result<(ServerConfig, Arc<CertSlot>), String> {
    let certified = certified_key(cert, cert_pem, key, key_pem)?;
    let slot = CertSlot::new(certified);
    let config = server_config(slot.clone(), protocols)?;
    Ok((config, slot))
}

/// A server config whose certificate comes from `slot`.
pub fn server_config(slot: Arc<CertSlot>, protocols: &[String]) -> Result<ServerConfig, String> {
    server_config_with(slot, protocols, None)
}

/// [`server_config`] that asks clients for certificates and verifies them
/// with `clients` (`client_auth`), when given.
pub fn server_config_with(
    slot: Arc<CertSlot>,
    protocols: &[String],
    clients: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
) -> Result<ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| format!("TLS: {e}"))?
        .with_client_cert_verifier(
            clients.unwrap_or_else(rustls::server::WebPkiClientVerifier::no_client_auth),
        )
        .with_cert_resolver(slot);
    config.alpn_protocols = alpn_list(protocols);
    config.ticketer = ticketer()?;
    config.session_storage = session_cache();
    // Clients resume with tickets; the server keeps no state per client.
    config.send_tls13_tickets = 2;
    Ok(config)
}

/// The ALPN names a server offers for its `protocols`: with "http/1.1"
/// comes "http/1.0" after it, as nginx offers, so that a client offering
/// only "http/1.0" (`curl --http1.0`) is answered over HTTP/1.x rather
/// than refused with `no_application_protocol` (RFC 7301 §3.2). The HTTP/1
/// loop answers both versions; only "h2" selects HTTP/2.
fn alpn_list(protocols: &[String]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(protocols.len() + 1);
    for p in protocols {
        out.push(p.as_bytes().to_vec());
        if p == "http/1.1" {
            out.push(b"http/1.0".to_vec());
        }
    }
    out
}

/// A PEM chain (leaf first) and its key as a signing certificate,
/// checked to belong together. Errors name the file at fault.
pub fn certified_key(
    cert: &Path,
    cert_pem: &[u8],
    key: &Path,
    key_pem: &[u8],
) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {}", cert.display(), pem_error(e)))?;
    if chain.is_empty() {
        return Err(format!(
            "{}: no certificate in it (a PEM file with a CERTIFICATE block is needed)",
            cert.display()
        ));
    }
    let key_der = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => format!(
            "{}: no private key in it (a PEM PRIVATE KEY block is needed)",
            key.display()
        ),
        e => format!("{}: {}", key.display(), pem_error(e)),
    })?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key_der, &provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => format!(
            "{}: this key does not belong to the certificate in {}",
            key.display(),
            cert.display()
        ),
        e => format!("{} / {}: {e}", cert.display(), key.display()),
    })
}

fn pem_error(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(e) => format!("cannot read: {e}"),
        rustls::pki_types::pem::Error::NoItemsFound => "nothing PEM-encoded in it".to_owned(),
        e => format!("not a valid PEM file: {e:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{alpn_list, name_matches};

    #[test]
    fn http_1_0_is_offered_by_alpn_after_http_1_1_as_nginx_does_rfc7301_3_2() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            alpn_list(&p(&["h2", "http/1.1"])),
            vec![b"h2".to_vec(), b"http/1.1".to_vec(), b"http/1.0".to_vec()]
        );
        // A block that speaks HTTP/2 only does not offer HTTP/1.0.
        assert_eq!(alpn_list(&p(&["h2"])), vec![b"h2".to_vec()]);
    }

    #[test]
    fn a_wildcard_matches_one_label_only_rfc6125_6_4_3() {
        assert!(name_matches("*.example.test", "a.example.test"));
        assert!(!name_matches("*.example.test", "example.test"));
        assert!(!name_matches("*.example.test", "a.b.example.test"));
        assert!(name_matches("example.test", "example.test"));
        assert!(!name_matches("example.test", "other.test"));
    }
}
