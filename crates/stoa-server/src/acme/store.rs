//! The `storage` directory: the account and certificates of each
//! directory (CA), and the lock that makes several Stoa instances on one
//! storage order a certificate once.
//!
//! ```text
//! STORAGE/DIRKEY/account.json     the ACME account (key + URL), mode 0600
//! STORAGE/DIRKEY/lock             flock(2)ed while an instance orders
//! STORAGE/DIRKEY/NAME/cert.pem    the chain, leaf first
//! STORAGE/DIRKEY/NAME/key.pem     its key, mode 0600
//! ```
//! DIRKEY is the directory URL made into a file name; NAME the first host.
//! Files are written whole under a temporary name and renamed, so a
//! reader (another instance) never sees half a certificate.

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where one certificate's files live.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    /// STORAGE/DIRKEY.
    pub(crate) dir: PathBuf,
    /// STORAGE/DIRKEY/NAME.
    pub(crate) cert_dir: PathBuf,
}

impl Store {
    pub(crate) fn new(storage: &Path, directory: &str, name: &str) -> Store {
        let dir = storage.join(file_name(directory));
        let cert_dir = dir.join(file_name(name));
        Store { dir, cert_dir }
    }

    pub(crate) fn account(&self) -> PathBuf {
        self.dir.join("account.json")
    }

    pub(crate) fn cert(&self) -> PathBuf {
        self.cert_dir.join("cert.pem")
    }

    pub(crate) fn key(&self) -> PathBuf {
        self.cert_dir.join("key.pem")
    }

    /// The stored chain and key, if both are there.
    pub(crate) fn load(&self) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
        let read = |p: PathBuf| match std::fs::read(p) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        };
        Ok(match (read(self.cert())?, read(self.key())?) {
            (Some(c), Some(k)) => Some((c, k)),
            _ => None,
        })
    }

    /// Stores a new chain and key; the key first, so that a reader who
    /// sees the new chain finds its key (and a stale key with an old
    /// chain fails the key check, which readers treat as "not there").
    pub(crate) fn save(&self, chain: &[u8], key: &[u8]) -> io::Result<()> {
        std::fs::create_dir_all(&self.cert_dir)?;
        write_atomic(&self.key(), key, 0o600)?;
        write_atomic(&self.cert(), chain, 0o644)
    }

    /// Takes the storage's lock for this directory, waiting for another
    /// instance that holds it (off the event loop).
    pub(crate) async fn lock(&self) -> io::Result<Lock> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.dir.join("lock");
        tokio::task::spawn_blocking(move || {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(&path)?;
            loop {
                // SAFETY: flock on a descriptor this function owns.
                let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
                if r == 0 {
                    return Ok(Lock { _file: f });
                }
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        })
        .await
        .map_err(io::Error::other)?
    }
}

/// The storage lock, held while it lives (closing the file releases it,
/// also when the process dies).
pub(crate) struct Lock {
    _file: std::fs::File,
}

/// A directory URL or host name as one file name: letters, digits, `.`
/// and `-` kept, anything else `-`; the scheme dropped.
pub(crate) fn file_name(s: &str) -> String {
    let s = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .unwrap_or(s);
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    if out.starts_with('.') {
        out.replace_range(0..1, "-");
    }
    out
}

fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .subsec_nanos();
    let tmp = path.with_extension(format!("tmp{}.{nanos}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)?;
    let done = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// Writes a file readable by its owner only (the account's key).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    write_atomic(path, bytes, 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_urls_become_one_file_name_each() {
        assert_eq!(
            file_name("https://acme-v02.api.letsencrypt.org/directory"),
            "acme-v02.api.letsencrypt.org-directory"
        );
        assert_eq!(
            file_name("https://127.0.0.1:14000/dir"),
            "127.0.0.1-14000-dir"
        );
        assert_eq!(file_name("../x"), "-.-x");
        assert_eq!(file_name(".."), "-.");
        assert_eq!(file_name("A.Example"), "a.example");
    }

    #[test]
    fn a_saved_certificate_is_loaded_back_and_its_key_is_private() {
        let d = std::env::temp_dir().join(format!("stoa-acme-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let s = Store::new(&d, "https://ca.test/dir", "a.test");
        assert!(s.load().unwrap().is_none());
        s.save(b"CHAIN", b"KEY").unwrap();
        let (c, k) = s.load().unwrap().unwrap();
        assert_eq!((c.as_slice(), k.as_slice()), (&b"CHAIN"[..], &b"KEY"[..]));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(s.key()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_lock_is_exclusive_between_holders() {
        let d = std::env::temp_dir().join(format!("stoa-acme-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let s = Store::new(&d, "https://ca.test/dir", "a.test");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let held = s.lock().await.unwrap();
            // A second open file description of the same lock must wait.
            let f = std::fs::File::open(s.dir.join("lock")).unwrap();
            // SAFETY: flock on a descriptor this test owns.
            let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            assert_eq!(r, -1);
            drop(held);
            // SAFETY: as above.
            let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            assert_eq!(r, 0);
        });
        let _ = std::fs::remove_dir_all(&d);
    }
}
