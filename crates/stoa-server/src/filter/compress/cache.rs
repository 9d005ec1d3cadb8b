//! Compressed forms of static files, made once per file version and
//! kept: a 100 KB page costs one compression per coding and level, not
//! one per request.
//!
//! Shared by all workers (a mutex held for a lookup or an insert, never
//! while compressing): brotli at a high level costs milliseconds per
//! file, which a per-worker cache would pay once per worker, and its
//! bound would multiply by the number of workers. Two workers missing
//! the same file at once both compress it; the second insert replaces
//! the first. Bounded in bytes; the least recently used form goes first.

use super::Coding;
use crate::filter::FileVersion;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Mutex;

/// Bytes of compressed forms kept, all workers together.
const MAX_BYTES: usize = 64 << 20;

/// A compressed form's identity: the file's version (device, inode,
/// size, mtime: what its ETag says), the coding and its level.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct Key {
    pub(super) version: FileVersion,
    pub(super) coding: Coding,
    pub(super) level: i32,
}

struct Kept {
    body: Bytes,
    /// When it was last used (a counter): the smallest goes first.
    used: u64,
}

#[derive(Default)]
struct Forms {
    map: HashMap<Key, Kept>,
    bytes: usize,
    clock: u64,
}

static FORMS: Mutex<Option<Forms>> = Mutex::new(None);

/// The kept form, if any.
pub(super) fn get(key: &Key) -> Option<Bytes> {
    let mut g = FORMS.lock().ok()?;
    let forms = g.as_mut()?;
    forms.clock += 1;
    let now = forms.clock;
    let k = forms.map.get_mut(key)?;
    k.used = now;
    Some(k.body.clone())
}

/// Keeps a form, making room by dropping the least recently used ones.
pub(super) fn put(key: Key, body: Bytes) {
    if body.len() > MAX_BYTES / 4 {
        return;
    }
    let Ok(mut g) = FORMS.lock() else { return };
    let forms = g.get_or_insert_with(Forms::default);
    forms.clock += 1;
    let used = forms.clock;
    let len = body.len();
    if let Some(old) = forms.map.insert(key, Kept { body, used }) {
        forms.bytes -= old.body.len();
    }
    forms.bytes += len;
    while forms.bytes > MAX_BYTES {
        // A scan, on insert only: inserts are one per file version.
        let Some(oldest) = forms
            .map
            .iter()
            .min_by_key(|(_, k)| k.used)
            .map(|(k, _)| *k)
        else {
            break;
        };
        if let Some(k) = forms.map.remove(&oldest) {
            forms.bytes -= k.body.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ino: u64) -> Key {
        Key {
            version: FileVersion {
                dev: 1,
                ino,
                size: 10,
                mtime: (1, 2),
            },
            coding: Coding::Gzip,
            level: 6,
        }
    }

    #[test]
    fn a_kept_form_is_found_by_its_exact_version_only() {
        put(key(u64::MAX - 1), Bytes::from_static(b"made"));
        assert_eq!(get(&key(u64::MAX - 1)).as_deref(), Some(&b"made"[..]));
        let mut other = key(u64::MAX - 1);
        other.version.mtime.1 += 1;
        assert!(get(&other).is_none(), "a new mtime is a new version");
        other = key(u64::MAX - 1);
        other.level = 7;
        assert!(get(&other).is_none(), "another level is another form");
    }
}
