//! `stoa cert DIR NAMES...`: a self-signed certificate for local testing
//! (rcgen), so that HTTPS and HTTP/2 can be tried without a CA.

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
    let ck = rcgen::generate_simple_self_signed(names).map_err(|e| e.to_string())?;
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
