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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_certificate_names_the_host_and_carries_the_digest_critically_rfc8737_3() {
        let digest = [7u8; 32];
        let key = challenge_key("a.test", &digest).unwrap();
        let (_, x) = x509_parser::parse_x509_certificate(key.cert[0].as_ref()).unwrap();
        let ext = x
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31")
            .expect("acmeIdentifier extension");
        assert!(ext.critical);
        // The extension's value is an OCTET STRING of the SHA-256 digest.
        let mut want = vec![0x04, 32];
        want.extend_from_slice(&digest);
        assert_eq!(ext.value, want.as_slice());
        let san = x.subject_alternative_name().unwrap().unwrap();
        assert_eq!(san.value.general_names.len(), 1);
        assert_eq!(format!("{}", san.value.general_names[0]), "DNSName(a.test)");
    }

    #[test]
    fn only_a_hello_offering_acme_tls_1_for_a_name_with_a_challenge_gets_it() {
        let key = challenge_key("b.test", &[1u8; 32]).unwrap();
        put("b.test", key);
        let acme: &[&[u8]] = &[ACME_TLS_1];
        let h2: &[&[u8]] = &[b"h2"];
        assert!(for_hello(Some("B.test"), Some(acme.iter().copied())).is_some());
        assert!(for_hello(Some("b.test"), Some(h2.iter().copied())).is_none());
        assert!(for_hello(Some("c.test"), Some(acme.iter().copied())).is_none());
        assert!(for_hello(None, Some(acme.iter().copied())).is_none());
        remove("b.test");
        assert!(for_hello(Some("b.test"), Some(acme.iter().copied())).is_none());
    }
}
