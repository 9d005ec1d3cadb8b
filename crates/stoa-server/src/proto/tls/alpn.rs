//! TLS-ALPN-01 (RFC 8737): while the ACME client has a challenge out for
//! a name, a ClientHello for that name offering only `acme-tls/1` gets the
//! challenge certificate, and the connection ends after the handshake
//! (§3: the validator sends nothing more). The ACME module puts the
//! certificates here; the acceptor looks them up before picking a site.

use rustls::server::{ResolvesServerCert, ServerConfig};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The ALPN protocol name of RFC 8737 §6.2.
pub(crate) const ACME_TLS_1: &[u8] = b"acme-tls/1";

fn answers() -> &'static Mutex<HashMap<String, Arc<CertifiedKey>>> {
    static A: OnceLock<Mutex<HashMap<String, Arc<CertifiedKey>>>> = OnceLock::new();
    A.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Answers TLS-ALPN-01 validations of `name` with `key` until [`remove`].
pub(crate) fn put(name: &str, key: CertifiedKey) {
    let mut a = answers().lock().unwrap_or_else(|p| p.into_inner());
    a.insert(name.to_ascii_lowercase(), Arc::new(key));
}

pub(crate) fn remove(name: &str) {
    let mut a = answers().lock().unwrap_or_else(|p| p.into_inner());
    a.remove(&name.to_ascii_lowercase());
}

/// The challenge certificate for a ClientHello, when it offers
/// `acme-tls/1` and names a host with a challenge out.
pub(crate) fn for_hello<'a>(
    sni: Option<&str>,
    alpn: Option<impl Iterator<Item = &'a [u8]>>,
) -> Option<Arc<CertifiedKey>> {
    let offered = alpn.is_some_and(|mut a| a.any(|p| p == ACME_TLS_1));
    if !offered {
        return None;
    }
    let name = sni?.to_ascii_lowercase();
    let a = answers().lock().unwrap_or_else(|p| p.into_inner());
    a.get(&name).cloned()
}

#[derive(Debug)]
struct One(Arc<CertifiedKey>);

impl ResolvesServerCert for One {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// A server config that speaks only `acme-tls/1` with the challenge
/// certificate (RFC 8737 §3: the server must negotiate that protocol).
pub(crate) fn config(key: Arc<CertifiedKey>) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(One(key)));
    config.alpn_protocols = vec![ACME_TLS_1.to_vec()];
    Ok(Arc::new(config))
}

/// The self-signed certificate of RFC 8737 §3 for `name`: its only
/// subjectAltName is `name`, and the critical acmeIdentifier extension
/// holds the SHA-256 digest of the key authorization.
pub(crate) fn challenge_key(name: &str, digest: &[u8]) -> Result<CertifiedKey, String> {
    let mut params =
        rcgen::CertificateParams::new(vec![name.to_owned()]).map_err(|e| e.to_string())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    let der = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    // Not `CertifiedKey::from_der`: its key check parses the certificate
    // with webpki, which refuses the critical acmeIdentifier extension.
    let signer = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(der)
        .map_err(|e| e.to_string())?;
    Ok(CertifiedKey::new(vec![cert.der().clone()], signer))
}
