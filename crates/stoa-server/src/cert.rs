//! `stoa cert DIR NAMES...`: a self-signed certificate for local testing
//! (rcgen), so that HTTPS and HTTP/2 can be tried without a CA.
//!
//! The certificate is one a browser accepts once it is trusted: its
//! subject's CN is the first name (every name is also in subjectAltName,
//! which is what clients check), it is for TLS servers (extendedKeyUsage
//! serverAuth), and it lives 397 days from an hour ago: under the 398
//! days Apple's and Chrome's root programs allow a TLS server
//! certificate, and the hour absorbs a client clock a little behind.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Writes `DIR/cert.pem` and `DIR/key.pem` (mode 0600) for `names` (DNS
/// names or IP addresses; default localhost, 127.0.0.1 and ::1) and
/// returns their paths.
pub fn self_signed(dir: &Path, names: &[String]) -> Result<(PathBuf, PathBuf), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    write_self_signed(&cert, &key, names)?;
    Ok((cert, key))
}

/// Writes a self-signed certificate for `names` (default localhost,
/// 127.0.0.1 and ::1) to `cert` and its key to `key` (mode 0600),
/// creating their directories.
pub fn write_self_signed(cert: &Path, key: &Path, names: &[String]) -> Result<(), String> {
    let names: Vec<String> = if names.is_empty() {
        vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
    } else {
        names.to_vec()
    };
    let ck = generate(&names, time::OffsetDateTime::now_utc()).map_err(|e| e.to_string())?;
    for p in [cert, key] {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
    }
    std::fs::write(cert, ck.cert.pem()).map_err(|e| format!("{}: {e}", cert.display()))?;
    // The key is readable by its owner only, like any private key.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(key)
        .map_err(|e| format!("{}: {e}", key.display()))?;
    f.write_all(ck.key_pair.serialize_pem().as_bytes())
        .map_err(|e| format!("{}: {e}", key.display()))?;
    Ok(())
}

/// How long a certificate from `stoa cert` is valid.
pub(crate) const LIFETIME: time::Duration = time::Duration::days(397);
/// How long before now it starts, for clients whose clock is behind.
pub(crate) const BACKDATE: time::Duration = time::Duration::hours(1);

/// A self-signed certificate for `names` (not empty), valid from `now`
/// less [`BACKDATE`] for [`LIFETIME`], and its new key (ECDSA P-256).
fn generate(
    names: &[String],
    now: time::OffsetDateTime,
) -> Result<rcgen::CertifiedKey, rcgen::Error> {
    let mut params = rcgen::CertificateParams::new(names.to_vec())?;
    let mut dn = rcgen::DistinguishedName::new();
    if let Some(first) = names.first() {
        dn.push(rcgen::DnType::CommonName, first.as_str());
    }
    params.distinguished_name = dn;
    params.not_before = now - BACKDATE;
    params.not_after = now - BACKDATE + LIFETIME;
    params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let key_pair = rcgen::KeyPair::generate()?;
    let cert = params.self_signed(&key_pair)?;
    Ok(rcgen::CertifiedKey { cert, key_pair })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificate_is_named_after_the_first_name_and_lives_397_days_from_an_hour_ago() {
        let now = time::OffsetDateTime::now_utc();
        let names = vec!["dev.example.test".to_owned(), "127.0.0.1".to_owned()];
        let ck = generate(&names, now).expect("generate");
        let p = ck.cert.params();
        let cn = p
            .distinguished_name
            .get(&rcgen::DnType::CommonName)
            .expect("a CN");
        assert_eq!(cn, &rcgen::DnValue::Utf8String("dev.example.test".into()));
        assert_eq!(p.not_before, now - time::Duration::hours(1));
        // CA/Browser Forum baseline and Apple/Chrome root programs: at most
        // 398 days for a TLS server certificate.
        assert!(p.not_after - p.not_before <= time::Duration::days(398));
        assert!(p.not_before < now);
    }
}
