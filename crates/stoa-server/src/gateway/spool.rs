//! Response buffering (`response_buffering` on a route): an application's
//! response body is taken as fast as it comes, into memory up to a bound
//! and then into an unlinked temporary file up to another, so that the
//! application (its connection, its `capacity` slot) is free as soon as
//! the response is in, whatever the client's pace (nginx
//! `proxy_buffering`, `proxy_buffers`, `proxy_max_temp_file_size`).
//!
//! Protocol-free: it holds bytes of a body already decoded. Beyond both
//! bounds it takes no more and the caller drains it to the client and
//! streams the rest with backpressure, as nginx does past
//! `proxy_max_temp_file_size`.
//!
//! Memory per buffered response: at most `memory` bytes held, plus one
//! [`CHUNK`] while a file part is read back. The file is unlinked from
//! the moment it exists (O_TMPFILE, or created and removed at once), so
//! nothing is left behind by a crash.

use crate::exchange::Exchange;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How much goes to the client at once while draining.
const CHUNK: usize = 64 * 1024;

/// A route's bounds, fixed for the life of a config.
#[derive(Debug, Clone)]
pub(crate) struct SpoolLimits {
    /// Bytes held in memory per response.
    pub(crate) memory: usize,
    /// Bytes written to the temporary file per response (0: none).
    pub(crate) disk: u64,
    /// Where the temporary file goes.
    pub(crate) temp_dir: Arc<Path>,
}

/// `response_buffering = true | { memory, disk, temp_dir }`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(untagged)]
pub enum ResponseBufferingConfig {
    On(bool),
    Limits(SpoolLimitsConfig),
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpoolLimitsConfig {
    /// Held in memory per response (default 256 KiB).
    pub memory: Option<crate::units::Size>,
    /// At most this much in the temporary file (default 1 GiB, nginx's
    /// `proxy_max_temp_file_size`); `0`: memory only.
    pub disk: Option<crate::units::Size>,
    /// The temporary file's directory (default: `$TMPDIR`, else `/tmp`).
    pub temp_dir: Option<PathBuf>,
}

impl ResponseBufferingConfig {
    /// The limits, or `None` when buffering is off. `resolve` makes a
    /// relative `temp_dir` absolute.
    pub(crate) fn limits(
        &self,
        resolve: &dyn Fn(&str) -> PathBuf,
    ) -> Result<Option<SpoolLimits>, String> {
        let c = match self {
            ResponseBufferingConfig::On(false) => return Ok(None),
            ResponseBufferingConfig::On(true) => SpoolLimitsConfig {
                memory: None,
                disk: None,
                temp_dir: None,
            },
            ResponseBufferingConfig::Limits(c) => c.clone(),
        };
        let memory = c.memory.map_or(256 * 1024, |s| s.0);
        let memory = usize::try_from(memory).map_err(|_| "`memory` is too large".to_owned())?;
        let disk = c.disk.map_or(1 << 30, |s| s.0);
        let temp_dir: PathBuf = match &c.temp_dir {
            Some(d) => resolve(&d.to_string_lossy()),
            None => std::env::temp_dir(),
        };
        if disk > 0 && !temp_dir.is_dir() {
            return Err(format!("temp_dir {}: not a directory", temp_dir.display()));
        }
        Ok(Some(SpoolLimits {
            memory,
            disk,
            temp_dir: temp_dir.into(),
        }))
    }
}

/// One response's body, taken in.
pub(crate) struct Spool {
    limits: SpoolLimits,
    mem: Vec<u8>,
    file: Option<File>,
    on_disk: u64,
}

impl Spool {
    pub(crate) fn new(limits: &SpoolLimits) -> Spool {
        Spool {
            limits: limits.clone(),
            mem: Vec::new(),
            file: None,
            on_disk: 0,
        }
    }

    /// Bytes held.
    #[cfg(test)]
    fn len(&self) -> u64 {
        self.mem.len() as u64 + self.on_disk
    }

    /// Takes all of `data` and says true, or takes nothing and says false
    /// when it would go beyond the bounds (or the file cannot be written:
    /// logged); the caller then drains and streams.
    pub(crate) fn push(&mut self, data: &[u8]) -> bool {
        if self.file.is_none() && self.mem.len() + data.len() <= self.limits.memory {
            self.mem.extend_from_slice(data);
            return true;
        }
        if self.on_disk + data.len() as u64 > self.limits.disk {
            return false;
        }
        let file = match &mut self.file {
            Some(f) => f,
            None => match unlinked_file(&self.limits.temp_dir) {
                Ok(f) => self.file.insert(f),
                Err(e) => {
                    tracing::warn!(
                        "response buffering: no temporary file in {}: {e}; streaming",
                        self.limits.temp_dir.display()
                    );
                    self.limits.disk = 0;
                    return false;
                }
            },
        };
        // Page-cache writes, as nginx makes them from its event loop.
        if let Err(e) = file.write_all(data) {
            tracing::warn!(
                "response buffering: writing the temporary file in {}: {e}; streaming",
                self.limits.temp_dir.display()
            );
            // What was written may be partial: the file's length says
            // nothing now, so the bytes written are counted by `on_disk`
            // only and the rest goes to the client after them.
            self.limits.disk = self.on_disk;
            return false;
        }
        self.on_disk += data.len() as u64;
        true
    }

    /// Sends what it holds to the client, in order, a [`CHUNK`] at a time
    /// at the client's pace. False when the client is gone or the file
    /// cannot be read back (the response is then cut short).
    pub(crate) async fn drain(&mut self, ex: &mut Exchange<'_>) -> bool {
        let mem = std::mem::take(&mut self.mem);
        for piece in mem.chunks(CHUNK) {
            ex.write(piece);
            if !ex.flush().await {
                return false;
            }
        }
        drop(mem);
        if let Some(f) = self.file.take() {
            let mut buf = vec![0u8; CHUNK.min(self.on_disk as usize)];
            let mut at = 0u64;
            while at < self.on_disk {
                let want = buf.len().min((self.on_disk - at) as usize);
                match f.read_at(&mut buf[..want], at) {
                    Ok(0) | Err(_) => {
                        tracing::error!(
                            "response buffering: the temporary file could not be read back"
                        );
                        return false;
                    }
                    Ok(n) => {
                        ex.write(&buf[..n]);
                        at += n as u64;
                        if !ex.flush().await {
                            return false;
                        }
                    }
                }
            }
            self.on_disk = 0;
        }
        true
    }
}

/// A file in `dir` with no name: O_TMPFILE where the file system has it
/// (Linux 3.11+, ext4, xfs, btrfs, tmpfs), else created and removed at
/// once. Mode 0600 either way.
fn unlinked_file(dir: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
    {
        Ok(f) => return Ok(f),
        // EOPNOTSUPP / EISDIR / EINVAL: no O_TMPFILE there.
        Err(e)
            if e.kind() == io::ErrorKind::NotFound
                || e.kind() == io::ErrorKind::PermissionDenied =>
        {
            return Err(e)
        }
        Err(_) => {}
    }
    static N: AtomicU64 = AtomicU64::new(0);
    let name = dir.join(format!(
        ".stoa-spool-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&name)?;
    std::fs::remove_file(&name)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(memory: usize, disk: u64) -> SpoolLimits {
        SpoolLimits {
            memory,
            disk,
            temp_dir: std::env::temp_dir().into(),
        }
    }

    fn read_all(s: &Spool) -> Vec<u8> {
        let mut out = s.mem.clone();
        if let Some(f) = &s.file {
            let mut b = vec![0; s.on_disk as usize];
            f.read_exact_at(&mut b, 0).unwrap();
            out.extend_from_slice(&b);
        }
        out
    }

    /// nginx `proxy_buffers` then `proxy_max_temp_file_size`: memory
    /// first, then the file, then no more (the caller streams).
    #[test]
    fn memory_fills_first_then_the_file_then_nothing_more_is_taken() {
        let mut s = Spool::new(&limits(10, 20));
        assert!(s.push(b"0123456789"));
        assert!(s.file.is_none());
        assert!(s.push(b"abcdefghij"));
        assert!(s.file.is_some(), "beyond memory: the file");
        assert!(s.push(b"ABCDEFGHIJ"));
        assert!(!s.push(b"x"), "beyond both bounds: nothing taken");
        assert_eq!(s.len(), 30);
        assert_eq!(read_all(&s), b"0123456789abcdefghijABCDEFGHIJ");
    }

    #[test]
    fn disk_zero_means_memory_only() {
        let mut s = Spool::new(&limits(4, 0));
        assert!(s.push(b"abcd"));
        assert!(!s.push(b"e"));
        assert!(s.file.is_none());
    }

    /// The file has no name from the start: nothing is left in the
    /// directory, whatever happens to the process.
    #[test]
    fn the_temporary_file_has_no_name_in_its_directory() {
        let dir = std::env::temp_dir().join(format!("stoa-spool-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = unlinked_file(&dir).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        drop(f);
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn true_gives_the_defaults_and_a_missing_temp_dir_is_refused() {
        let resolve = |s: &str| PathBuf::from(s);
        let l = ResponseBufferingConfig::On(true)
            .limits(&resolve)
            .unwrap()
            .unwrap();
        assert_eq!((l.memory, l.disk), (256 * 1024, 1 << 30));
        assert!(ResponseBufferingConfig::On(false)
            .limits(&resolve)
            .unwrap()
            .is_none());
        let bad = ResponseBufferingConfig::Limits(SpoolLimitsConfig {
            memory: None,
            disk: None,
            temp_dir: Some("/nonexistent/stoa".into()),
        });
        assert!(bad
            .limits(&resolve)
            .unwrap_err()
            .contains("not a directory"));
    }
}
