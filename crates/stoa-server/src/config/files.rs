//! Where loading a configuration reads its files from: the config file,
//! and the certificates and keys of `[[tls]]` (the files the privileged
//! parent must read, since only root may). Loaded as root, the reads are
//! recorded; the unprivileged server process then loads the same
//! configuration from that record (a [`Recorded`] sent over the broker),
//! falling back to the disk for anything not in it.
//!
//! What the server reads while serving (document roots, Lua scripts, CGI
//! programs) is not read through here: the server process opens those as
//! its own user, so that loading fails there as serving would.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

/// What a load read from the disk, for another process to load from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    /// Files read, by the path the loader asked for.
    pub reads: Vec<(PathBuf, Vec<u8>)>,
    /// Directories made absolute (`canonicalize`), by the path asked for:
    /// the config's own directory may not be searchable by the server's
    /// user, and every relative path in the file is taken from it.
    pub canonical: Vec<(PathBuf, PathBuf)>,
}

/// The file-reading seam of config loading.
#[derive(Debug, Default)]
pub struct Files {
    given: HashMap<PathBuf, Vec<u8>>,
    given_canonical: HashMap<PathBuf, PathBuf>,
    record: Option<RefCell<Recorded>>,
}

impl Files {
    /// Straight from the disk, nothing kept.
    pub fn disk() -> Files {
        Files::default()
    }

    /// From the disk, keeping what was read ([`Files::into_recorded`]).
    pub fn recording() -> Files {
        Files {
            record: Some(RefCell::new(Recorded::default())),
            ..Files::default()
        }
    }

    /// From what another load recorded; the disk for anything else.
    pub fn from_recorded(r: Recorded) -> Files {
        Files {
            given: r.reads.into_iter().collect(),
            given_canonical: r.canonical.into_iter().collect(),
            record: None,
        }
    }

    /// What was read so far (empty unless [`Files::recording`]).
    pub fn into_recorded(self) -> Recorded {
        self.record.map(RefCell::into_inner).unwrap_or_default()
    }

    /// The bytes of `path`.
    pub fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        if let Some(b) = self.given.get(path) {
            return Ok(b.clone());
        }
        let bytes = std::fs::read(path)?;
        if let Some(r) = &self.record {
            let mut r = r.borrow_mut();
            if !r.reads.iter().any(|(p, _)| p == path) {
                r.reads.push((path.to_path_buf(), bytes.clone()));
            }
        }
        Ok(bytes)
    }

    /// Whether `path` exists (given, or on the disk).
    pub fn exists(&self, path: &Path) -> bool {
        self.given.contains_key(path) || path.exists()
    }

    /// `path` made absolute with symlinks resolved.
    pub fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        if let Some(c) = self.given_canonical.get(path) {
            return Ok(c.clone());
        }
        let c = path.canonicalize()?;
        if let Some(r) = &self.record {
            r.borrow_mut()
                .canonical
                .push((path.to_path_buf(), c.clone()));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_read_is_served_from_the_record_once_the_file_is_gone() {
        let d = std::env::temp_dir().join(format!("stoa-files-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("key.pem");
        std::fs::write(&f, b"secret").unwrap();
        let rec = Files::recording();
        assert_eq!(rec.read(&f).unwrap(), b"secret");
        assert_eq!(rec.read(&f).unwrap(), b"secret");
        let canon = rec.canonicalize(&d).unwrap();
        let r = rec.into_recorded();
        assert_eq!(r.reads.len(), 1, "read twice, recorded once");
        std::fs::remove_dir_all(&d).unwrap();
        let from = Files::from_recorded(r);
        assert_eq!(from.read(&f).unwrap(), b"secret");
        assert!(from.exists(&f));
        assert_eq!(from.canonicalize(&d).unwrap(), canon);
        // Anything else still comes from the disk (and is missing).
        assert!(from.read(&d.join("other.pem")).is_err());
    }
}
