//! Client certificates (nginx `ssl_verify_client`, Apache `SSLVerifyClient`,
//! Caddy `client_auth`): a `[[tls]]` block's `client_auth` table becomes a
//! rustls client verifier (webpki: the chain up to one of the block's CAs,
//! and the CRLs given), and a verified client's certificate becomes what
//! CGI and FastCGI read under mod_ssl's names (`SSL_CLIENT_S_DN`,
//! `SSL_CLIENT_VERIFY`, ...), what the proxy's header templates read under
//! nginx's (`$ssl_client_s_dn`, ...), and what the access phase's
//! `require_client_cert` asks for.
//!
//! rustls ends the handshake of a client whose certificate fails (unknown
//! CA, revoked, expired): a connection that exists has either no
//! certificate (`required = false`) or a verified one. So the verify result
//! is `SUCCESS` or `NONE`, never mod_ssl's `FAILED:reason` (which only
//! `SSLVerifyClient optional_no_ca` produces).

use crate::http::client_cert::ClientCert;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `client_auth = { ca = "...", required = true, crl = "..." }` in a
/// `[[tls]]` block.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientAuthConfig {
    /// PEM file of the CA certificates a client's chain must lead to
    /// (nginx `ssl_client_certificate`, Caddy `trust_pool file`). Their
    /// names go to the client in the CertificateRequest.
    pub ca: String,
    /// `true` (default): a client without a certificate is refused in the
    /// handshake (nginx `ssl_verify_client on`). `false`: it may come in
    /// without one, and one it sends must still verify (`optional`).
    #[serde(default = "yes")]
    pub required: bool,
    /// PEM file of certificate revocation lists (nginx `ssl_crl`). As in
    /// nginx, every CA below the trust anchor needs its CRL in it: a
    /// certificate whose revocation status is unknown is refused.
    pub crl: Option<String>,
}

fn yes() -> bool {
    true
}

/// What went wrong with a `client_auth` table's files.
#[derive(Debug)]
pub enum ClientAuthError {
    /// A file could not be read (its path, why).
    Read(PathBuf, String),
    /// A file held no PEM block of the kind needed.
    Empty(PathBuf, &'static str),
    /// A PEM block or certificate in it is malformed.
    Bad(PathBuf, String),
}

impl std::fmt::Display for ClientAuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientAuthError::Read(p, e) => write!(f, "{}: cannot read: {e}", p.display()),
            ClientAuthError::Empty(p, what) => {
                write!(f, "{}: no {what} in it (a PEM file is needed)", p.display())
            }
            ClientAuthError::Bad(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

/// The verifier of a `client_auth` table whose files are `ca` and `crl`
/// (paths resolved), read through `read` (the config loader's seam, so
/// that root reads them for a server that runs as `user`).
pub fn verifier(
    cfg: &ClientAuthConfig,
    ca: &Path,
    crl: Option<&Path>,
    read: &dyn Fn(&Path) -> std::io::Result<Vec<u8>>,
) -> Result<Arc<dyn ClientCertVerifier>, ClientAuthError> {
    let load = |p: &Path| read(p).map_err(|e| ClientAuthError::Read(p.to_owned(), e.to_string()));
    let pem = load(ca)?;
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&pem) {
        let c = c.map_err(|e| ClientAuthError::Bad(ca.to_owned(), format!("{e:?}")))?;
        roots
            .add(c)
            .map_err(|e| ClientAuthError::Bad(ca.to_owned(), format!("a CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(ClientAuthError::Empty(ca.to_owned(), "CA certificate"));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    if let Some(crl) = crl {
        let pem = load(crl)?;
        let crls = CertificateRevocationListDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ClientAuthError::Bad(crl.to_owned(), format!("{e:?}")))?;
        if crls.is_empty() {
            return Err(ClientAuthError::Empty(crl.to_owned(), "X509 CRL"));
        }
        b = b.with_crls(crls);
    }
    if !cfg.required {
        b = b.allow_unauthenticated();
    }
    b.build().map_err(|e| {
        let at = match &e {
            rustls::server::VerifierBuilderError::InvalidCrl(_) => crl.unwrap_or(ca),
            _ => ca,
        };
        ClientAuthError::Bad(at.to_owned(), e.to_string())
    })
}

/// Checks a resumed session's client against the block's verifier as
/// it is now: rustls restores the certificate a session was verified with
/// and does not verify it again, and tickets outlive reloads (and are
/// shared between instances), so a certificate revoked by a CRL loaded
/// since, one from a CA no longer trusted, or no certificate where one is
/// now required would otherwise come back in. A full handshake was
/// verified by rustls already.
pub fn recheck(v: &dyn ClientCertVerifier, conn: &rustls::ServerConnection) -> Result<(), String> {
    if conn.handshake_kind() != Some(rustls::HandshakeKind::Resumed) {
        return Ok(());
    }
    match conn.peer_certificates() {
        Some([leaf, chain @ ..]) => v
            .verify_client_cert(leaf, chain, rustls::pki_types::UnixTime::now())
            .map(|_| ())
            .map_err(|e| format!("resumed session's client certificate: {e}")),
        _ if v.client_auth_mandatory() => {
            Err("resumed session without a client certificate, which is now required".into())
        }
        _ => Ok(()),
    }
}

/// The verified client of a TLS connection: its leaf certificate, if it
/// sent one (rustls refuses the handshake of one that fails), with the SNI
/// name the handshake was made for.
pub fn client_cert(conn: &rustls::ServerConnection) -> Option<ClientCert> {
    let leaf = conn.peer_certificates()?.first()?;
    Some(ClientCert::from_der(leaf.as_ref(), conn.server_name()))
}

/// The verified client of a QUIC connection accepted on the address whose
/// TLS side is `acceptor`, as [`client_cert`] gives it for TCP: the leaf
/// of the chain quinn reports (`peer_identity`), with the SNI name. quinn
/// does not tell whether the handshake resumed a session (whose
/// certificate rustls restores without verifying it again: see
/// [`recheck`]), so the chain is verified again here against the block's
/// verifier as it is now, every time. Err: the client must not be served
/// (its certificate no longer verifies, or it has none and one is
/// required); the caller closes the connection.
pub(crate) fn quic_client(
    acceptor: &super::Acceptor,
    conn: &quinn::Connection,
) -> Result<Option<std::sync::Arc<ClientCert>>, String> {
    let sni = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.server_name);
    let Some(v) = acceptor
        .pick(sni.as_deref())
        .and_then(|site| site.clients.as_ref())
    else {
        return Ok(None);
    };
    let chain = conn
        .peer_identity()
        .and_then(|p| p.downcast::<Vec<CertificateDer<'static>>>().ok());
    match chain.as_deref().map(Vec::as_slice) {
        Some([leaf, rest @ ..]) => {
            v.verify_client_cert(leaf, rest, rustls::pki_types::UnixTime::now())
                .map_err(|e| format!("client certificate: {e}"))?;
            Ok(Some(std::sync::Arc::new(ClientCert::from_der(
                leaf.as_ref(),
                sni.as_deref(),
            ))))
        }
        _ if v.client_auth_mandatory() => Err("no client certificate, which is required".into()),
        _ => Ok(None),
    }
}

/// [`quic_client`] for a connection on the address configured as
/// `configured` (the key of `acceptors`, the runtime's TLS addresses).
/// A client refused is logged and its connection closed (Err): after
/// the handshake QUIC has no TLS alert to send, so the close is HTTP/3's
/// H3_GENERAL_PROTOCOL_ERROR with a reason; a full handshake's refusal
/// was rustls' alert already ([`log_quic_handshake_error`]).
pub(crate) fn admit_quic(
    acceptors: &[(std::net::SocketAddr, std::sync::Arc<super::Acceptor>)],
    configured: std::net::SocketAddr,
    conn: &quinn::Connection,
) -> Result<Option<std::sync::Arc<ClientCert>>, ()> {
    let Some((_, acc)) = acceptors.iter().find(|(a, _)| *a == configured) else {
        return Ok(None);
    };
    quic_client(acc, conn).map_err(|e| {
        let peer = conn.remote_address();
        tracing::info!("h3: {peer}: client certificate refused: {e}");
        conn.close(quinn::VarInt::from_u32(0x0101), b"client certificate");
    })
}

/// Logs a failed QUIC handshake as [`crate::conn`] logs a TCP one: at
/// info when it failed on the client's certificate (what an operator of
/// `client_auth` needs to see, as nginx's "client SSL certificate verify
/// error"), at debug otherwise (scanners', broken clients' noise). rustls'
/// alert is QUIC's crypto error 0x100 + alert (RFC 9001 §4.8):
/// bad_certificate (42) to certificate_unknown (46), unknown_ca (48),
/// certificate_required (116).
pub(crate) fn log_quic_handshake_error(peer: std::net::SocketAddr, e: &quinn::ConnectionError) {
    let refused = match e {
        quinn::ConnectionError::TransportError(t) => {
            matches!(
                u64::from(t.code).checked_sub(0x100),
                Some(42..=46 | 48 | 116)
            )
        }
        _ => false,
    };
    if refused {
        tracing::info!("h3: handshake with {peer}: client certificate refused: {e}");
    } else {
        tracing::debug!("h3: handshake with {peer}: {e}");
    }
}
