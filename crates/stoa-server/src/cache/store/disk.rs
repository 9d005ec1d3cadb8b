//! A zone's files: one per object, `ab/cd/<name>.<generation>` under the
//! zone's directory, where `<name>` is the SHA-256 of the full key and
//! the variant (64 hex digits) and `<generation>` makes every file its
//! own object's alone (a replacement never has a removal aimed at it).
//!
//! A file is a fixed part, a header and the body:
//!
//! ```text
//! 0   magic "STOAOBJ\0"        8 bytes
//! 8   format version           u32 LE (2)
//! 12  header length            u32 LE
//! 16  body length              u64 LE
//! 24  CRC-32 of the body
//! 28  CRC-32 of bytes 0..28 and the header
//! 32  header: status u16, request and response time (unix ms, u64),
//!     then key, URL, variant, header lines (each u32 length + bytes),
//!     tag count u32 and each tag (u32 length + bytes)
//!     body
//! ```
//!
//! The body's CRC is checked when the index is rebuilt at start (in the
//! background: a byte of body that changed on disk is a miss and a log
//! line, never served).
//!
//! The file's size must be 32 + header + body: a file a crash cut short
//! is found so at start. Files are written under `tmp/` (cleared at
//! start) and renamed into place complete. There is no fsync: losing the
//! last seconds' objects in a power cut costs misses, and a durable write
//! per object would cost every fill a disk flush.

use super::{Disk, DiskBody, Meta, StoreKey, Zone};
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MAGIC: &[u8; 8] = b"STOAOBJ\0";
const VERSION: u32 = 2;
const FIXED: u64 = 32;
/// A header longer than this is not one of ours.
const MAX_HEADER: u32 = 16 << 20;

/// Makes the zone's directory and an empty `tmp/` in it (what a crash
/// left there half written goes).
pub(super) fn prepare(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let tmp = dir.join("tmp");
    if tmp.is_dir() {
        for e in fs::read_dir(&tmp)?.flatten() {
            let _ = fs::remove_file(e.path());
        }
    } else {
        fs::create_dir(&tmp)?;
    }
    Ok(())
}

/// The account root serves as (`user`), once start-up knows it: zone
/// directories root makes are given to it.
static OWNER: std::sync::Mutex<Option<(u32, u32)>> = std::sync::Mutex::new(None);

/// Gives `dir` and its `tmp/` to the serving account, when root made them
/// for it (as nginx's master does for `proxy_cache_path`): the server,
/// which no longer runs as root, writes its objects there.
pub(super) fn give(dir: &Path) -> io::Result<()> {
    let owner = *OWNER.lock().unwrap_or_else(|e| e.into_inner());
    let Some((uid, gid)) = owner else {
        return Ok(());
    };
    for p in [dir.to_path_buf(), dir.join("tmp")] {
        std::os::unix::fs::chown(&p, Some(uid), Some(gid))
            .map_err(|e| io::Error::new(e.kind(), format!("chown {}: {e}", p.display())))?;
    }
    Ok(())
}

/// The privileged parent's part (`super::give_dirs_to` was called): only
/// make and give directories.
pub(super) fn for_server() -> bool {
    OWNER.lock().unwrap_or_else(|e| e.into_inner()).is_some()
}

/// The zone directory and its `tmp/`, made if missing and given to the
/// server; what is in them is the server's (nothing cleared).
pub(super) fn make_for_server(dir: &Path) -> io::Result<()> {
    fs::create_dir_all(dir.join("tmp"))?;
    give(dir)
}

/// Sets the account zone directories are given to (see [`give`]).
pub(super) fn set_owner(uid: u32, gid: u32) {
    *OWNER.lock().unwrap_or_else(|e| e.into_inner()) = Some((uid, gid));
}

/// Where generations start when a zone opens: the time in nanoseconds,
/// so that names rarely meet those of an earlier run (`complete` checks
/// anyway).
pub(super) fn first_generation() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos() as u64)
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().try_into().unwrap_or(u64::MAX))
}

/// An object's header, encoded (the fixed part is made at the end, when
/// the body's length is known).
pub(super) struct Header {
    bytes: Vec<u8>,
    /// The file's name (without generation).
    name: String,
}

impl Header {
    pub(super) fn new(key: &StoreKey, meta: &Meta) -> Header {
        let mut h = Vec::with_capacity(64 + key.bytes.len() + key.url.len() + meta.head.len());
        h.extend_from_slice(&meta.status.to_le_bytes());
        h.extend_from_slice(&unix_ms(meta.request_time).to_le_bytes());
        h.extend_from_slice(&unix_ms(meta.response_time).to_le_bytes());
        for part in [&key.bytes[..], &key.url, &meta.variant, &meta.head] {
            put(&mut h, part);
        }
        h.extend_from_slice(&(meta.tags.len() as u32).to_le_bytes());
        for t in &meta.tags {
            put(&mut h, t);
        }
        Header {
            bytes: h,
            name: name(key, &meta.variant),
        }
    }

    /// The fixed part for a body of `len` bytes.
    fn fixed(&self, len: u64, body_crc: u32) -> [u8; FIXED as usize] {
        let mut f = [0u8; FIXED as usize];
        f[..8].copy_from_slice(MAGIC);
        f[8..12].copy_from_slice(&VERSION.to_le_bytes());
        f[12..16].copy_from_slice(&(self.bytes.len() as u32).to_le_bytes());
        f[16..24].copy_from_slice(&len.to_le_bytes());
        f[24..28].copy_from_slice(&body_crc.to_le_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&f[..28]);
        crc.update(&self.bytes);
        f[28..32].copy_from_slice(&crc.finalize().to_le_bytes());
        f
    }
}

/// The CRC-32 of `len` bytes of `file` from `at` (read back: the fill
/// wrote them moments ago, they come from the page cache).
fn body_crc(file: &File, at: u64, len: u64) -> io::Result<u32> {
    let mut crc = crc32fast::Hasher::new();
    let mut buf = vec![0u8; len.min(64 << 10) as usize];
    let mut pos = 0;
    while pos < len {
        let n = ((len - pos) as usize).min(buf.len());
        file.read_exact_at(&mut buf[..n], at + pos)?;
        crc.update(&buf[..n]);
        pos += n as u64;
    }
    Ok(crc.finalize())
}

fn put(h: &mut Vec<u8>, part: &[u8]) {
    h.extend_from_slice(&(part.len() as u32).to_le_bytes());
    h.extend_from_slice(part);
}

/// The file name's hash: the full key and the variant, unambiguously.
fn name(key: &StoreKey, variant: &[u8]) -> String {
    let mut d = Sha256::new();
    d.update((key.bytes.len() as u64).to_le_bytes());
    d.update(&key.bytes);
    d.update(variant);
    let mut s = String::with_capacity(64);
    for b in d.finalize().iter() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// A temporary file under `tmp/` holding `header` (the body follows at
/// the position returned).
pub(super) fn create_copy(
    zone: &Zone,
    dir: &Path,
    zd: &Disk,
    header: &Header,
) -> io::Result<(File, PathBuf, u64)> {
    let g = zd.generation.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join("tmp").join(format!("{g:016x}"));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    let written = (|| {
        #[cfg(test)]
        zone.take_write_budget(FIXED + header.bytes.len() as u64)?;
        let _ = zone;
        file.write_all_at(&header.fixed(0, 0), 0)?;
        file.write_all_at(&header.bytes, FIXED)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok((file, tmp, FIXED + header.bytes.len() as u64))
}

/// Completes a disk copy whose body (`len` bytes) is written: the fixed
/// part, then the rename into place. Its path and size.
pub(super) fn complete(
    zone: &Zone,
    file: &File,
    header: Header,
    body_at: u64,
    len: u64,
    tmp: &Path,
) -> io::Result<(PathBuf, u64)> {
    let Some(zd) = zone.disk.as_ref() else {
        return Err(io::ErrorKind::NotFound.into());
    };
    let crc = body_crc(file, body_at, len)?;
    file.write_all_at(&header.fixed(len, crc), 0)?;
    let n = &header.name;
    let sub = zd.dir.join(&n[..2]).join(&n[2..4]);
    fs::create_dir_all(&sub)?;
    // A name no file has: a rename over another object's file would
    // leave that object's removal aimed at this one.
    let path = loop {
        let g = zd.generation.fetch_add(1, Ordering::Relaxed);
        let p = sub.join(format!("{n}.{g:016x}"));
        if !p.exists() {
            break p;
        }
    };
    fs::rename(tmp, &path)?;
    Ok((path, body_at + len))
}

/// A new file for `old`'s body under new fields (a 304's refresh).
pub(super) fn rewrite(
    zone: &Zone,
    zd: &Disk,
    key: &StoreKey,
    meta: &Meta,
    old: &DiskBody,
) -> io::Result<DiskBody> {
    let header = Header::new(key, meta);
    let (mut file, tmp, body_at) = create_copy(zone, &zd.dir, zd, &header)?;
    let copied = (|| {
        // A descriptor of its own: its offset moves.
        let mut src = File::open(&old.path)?;
        src.seek(SeekFrom::Start(old.at))?;
        file.seek(SeekFrom::Start(body_at))?;
        let n = io::copy(&mut (&mut src).take(old.len), &mut file)?;
        if n != old.len {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        complete(zone, &file, header, body_at, old.len, &tmp)
    })();
    match copied {
        Ok((path, size)) => Ok(DiskBody {
            path,
            at: body_at,
            len: old.len,
            size,
            open: Mutex::new(Weak::new()),
        }),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// A temporary file with no name: in `dir`'s `tmp/` (a zone's), else
/// the system's temporary directory. Gone when its last reader closes.
pub(super) fn unlinked_temp(dir: Option<&Path>) -> io::Result<File> {
    let tmp = dir.map_or_else(std::env::temp_dir, |d| d.join("tmp"));
    let anonymous = OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(&tmp);
    if let Ok(f) = anonymous {
        return Ok(f);
    }
    // A file system without O_TMPFILE: create, then unlink at once.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let path = tmp.join(format!(
        "stoa-fill-{}-{n}-{:x}",
        std::process::id(),
        first_generation()
    ));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    fs::remove_file(&path)?;
    Ok(f)
}

/// Rebuilds a zone's index from its files' headers (a background
/// thread, at start). A file that is not a whole object of ours goes,
/// with one log line.
pub(super) fn load(dir: &Path, zone: &Weak<Zone>) {
    let mut bad = 0u64;
    for top in hex_dirs(dir) {
        for sub in hex_dirs(&top) {
            let Ok(entries) = fs::read_dir(&sub) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                let Some(z) = zone.upgrade() else { return };
                match read_header(&path) {
                    Ok((key, meta, body)) => z.adopt(key, meta, body),
                    Err(why) => {
                        bad += 1;
                        tracing::warn!(zone = %z.name, "cache: removing {}: {why}", path.display());
                        let _ = fs::remove_file(&path);
                    }
                }
            }
        }
    }
    if let Some(z) = zone.upgrade() {
        z.loading.store(false, Ordering::Release);
        if bad > 0 {
            z.counters.store_failures.fetch_add(bad, Ordering::Relaxed);
        }
    }
}

/// The subdirectories of `dir` named by two hex digits (ours).
fn hex_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.as_encoded_bytes();
            n.len() == 2 && n.iter().all(u8::is_ascii_hexdigit) && e.path().is_dir()
        })
        .map(|e| e.path())
        .collect()
}

/// A file's key, meta and body place, if it is a whole object of ours.
pub(super) fn read_header(path: &Path) -> Result<(StoreKey, Meta, DiskBody), String> {
    let mut f = File::open(path).map_err(|e| e.to_string())?;
    let size = f.metadata().map_err(|e| e.to_string())?.len();
    let mut fixed = [0u8; FIXED as usize];
    f.read_exact(&mut fixed)
        .map_err(|_| "shorter than a header".to_owned())?;
    if &fixed[..8] != MAGIC {
        return Err("not a cache object".into());
    }
    let u32_at =
        |i: usize| u32::from_le_bytes([fixed[i], fixed[i + 1], fixed[i + 2], fixed[i + 3]]);
    if u32_at(8) != VERSION {
        return Err(format!("format version {}", u32_at(8)));
    }
    let hlen = u32_at(12);
    if hlen > MAX_HEADER {
        return Err("header too long".into());
    }
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&fixed[16..24]);
    let len = u64::from_le_bytes(len8);
    let body_at = FIXED + u64::from(hlen);
    if body_at.checked_add(len) != Some(size) {
        return Err(format!(
            "truncated ({size} bytes, {} expected)",
            body_at + len
        ));
    }
    let mut h = vec![0u8; hlen as usize];
    f.read_exact(&mut h).map_err(|e| e.to_string())?;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&fixed[..28]);
    crc.update(&h);
    if crc.finalize() != u32_at(28) {
        return Err("checksum mismatch".into());
    }
    match body_crc(&f, body_at, len) {
        Ok(c) if c == u32_at(24) => {}
        Ok(_) => return Err("body checksum mismatch".into()),
        Err(e) => return Err(e.to_string()),
    }
    let (key, meta) = decode(&h, len).ok_or_else(|| "malformed header".to_owned())?;
    Ok((
        key,
        meta,
        DiskBody {
            path: path.to_owned(),
            at: body_at,
            len,
            size,
            open: Mutex::new(Weak::new()),
        },
    ))
}

fn decode(h: &[u8], len: u64) -> Option<(StoreKey, Meta)> {
    let mut r = Reader(h);
    let status = u16::from_le_bytes(r.take(2)?.try_into().ok()?);
    let ms = |r: &mut Reader| -> Option<SystemTime> {
        let v = u64::from_le_bytes(r.take(8)?.try_into().ok()?);
        UNIX_EPOCH.checked_add(Duration::from_millis(v))
    };
    let request_time = ms(&mut r)?;
    let response_time = ms(&mut r)?;
    let key = r.part()?;
    let url = r.part()?;
    let variant = r.part()?;
    let head = r.part()?;
    let n = u32::from_le_bytes(r.take(4)?.try_into().ok()?);
    let mut tags = Vec::new();
    for _ in 0..n {
        tags.push(Box::from(r.part()?));
    }
    if !r.0.is_empty() {
        return None;
    }
    Some((
        StoreKey::new(key, url),
        Meta {
            status,
            head: bytes::Bytes::copy_from_slice(head),
            variant: variant.into(),
            request_time,
            response_time,
            tags,
            len: Some(len),
        },
    ))
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }

    fn part(&mut self) -> Option<&'a [u8]> {
        let n = u32::from_le_bytes(self.take(4)?.try_into().ok()?);
        self.take(n as usize)
    }
}
