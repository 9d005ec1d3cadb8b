//! The response cache's store: zones of objects in memory and on disk,
//! fills that readers follow as they grow, collapsed forwarding, tags,
//! purges and counters. It stores what it is given and knows nothing of
//! HTTP's rules (`cache::policy` decides what may be stored and for how
//! long).
//!
//! # API
//!
//! - [`zone`]`(&ZoneSpec) -> Result<Arc<Zone>, ZoneError>`: the
//!   process-wide zone of that name. A reload that names it again gets
//!   the same zone and its objects, with the new bounds; a different
//!   `disk` directory makes a new zone. [`retain`]`(&[names])` drops the
//!   zones a new configuration no longer names; [`zones`] lists them (the
//!   status page). [`Zone::detached`] makes an unregistered memory-only
//!   zone (`stoa check`, tests); [`Zone::open`] an unregistered zone on
//!   its directory (tests: a restart).
//! - [`StoreKey`]`::new(bytes, url)`: a primary key's full bytes (compared
//!   whole on every lookup: two keys whose hashes collide never share an
//!   object), their hash (the store's own, seeded per process) and the
//!   URL it was made from (for purges by URL).
//! - [`Zone::lookup`]`(&key) -> Vec<Arc<Object>>`: the stored variants of
//!   a primary key, most recent first (the caller picks one by its
//!   `Meta::variant`, the secondary key that `Vary` made). An [`Object`]
//!   is a [`Meta`] (status, header lines, variant, request and response
//!   times, tags, body length) and a [`Body`]: `Mem(Bytes)` or `Disk`
//!   (a file range: [`Object::file`] opens it for sendfile).
//! - [`Zone::begin`]`(&key) -> Begin`: `Lead(FillGuard)` for the first
//!   request of a primary key, `Wait(Arc<Fill>)` for the others while
//!   that fill lasts, `Uncacheable` while [`Zone::mark_uncacheable`]
//!   holds (hit-for-miss: each request fetches on its own).
//! - [`FillGuard`] (the writer, on one worker thread): `set_head(meta,
//!   store)`, `append(bytes)`, `finish()` (stored if `store`, the length
//!   within `max_object` and the bounds allow), `finish_with(object)`
//!   (a revalidated object answers the waiters); dropped unfinished, the
//!   fill has failed and nothing is stored. [`Fill`] (readers, on any
//!   thread): `head().await -> Option<Meta>` (None: failed before a
//!   head), `read(offset).await -> Chunk` (`Mem(Bytes)`, `File(file,
//!   offset, len)`, `End`, `Failed`). Body bytes past 1 MiB (or past what
//!   a memory-only zone could keep) go to a file, the zone's disk copy
//!   being written or an unlinked temporary file, so a large or
//!   uncacheable response never sits in memory and a slow reader never
//!   holds the writer.
//! - [`Zone::update_meta`]`(&old, meta) -> Arc<Object>` (a 304 refresh:
//!   the body kept), [`Zone::remove`]`(&key)`, [`Zone::remove_object`],
//!   [`Zone::purge_url`]`(url)`, [`Zone::purge_tag`]`(tag)` (counts of
//!   objects removed), [`Zone::count`]`(Event)` and [`Zone::stats`].
//!
//! # Bounds
//!
//! Memory: least recently used first, by bytes, under `memory`; an object
//! with a disk copy leaves memory and is read from its file. Disk: least
//! recently used first under `disk_size`. An object unused for `inactive`
//! is removed (at a lookup, or when another is stored). The index is one
//! mutex held for map operations only: no I/O, no allocation of bodies
//! under it.
//!
//! # Disk
//!
//! `disk.rs`: one file per object, `ab/cd/<sha256 of key and
//! variant>.<generation>`, a header (magic, version, lengths, CRC-32,
//! key, URL, meta, tags) and the body; written under `tmp/` and renamed
//! into place when complete. At start a background thread rebuilds the
//! index from the headers alone; a file that is corrupt, truncated or
//! foreign is removed with one log line. No fsync: a cache may lose what
//! the last seconds wrote, and the checks at start drop a file the crash
//! cut short.

// Parts of the API the status page and the request path take up as
// they merge (`zones`, `retain`, `stats`, `count`...).

mod disk;
mod fill;
#[cfg(test)]
mod tests;

pub(crate) use fill::{Begin, Chunk, Fill, FillGuard};

use bytes::Bytes;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::fs::File;
use std::hash::BuildHasher;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime};

/// Most variants kept of one primary key (`Vary` on a field with many
/// values would otherwise grow one key without bound); the oldest goes.
const MAX_VARIANTS: usize = 16;

/// A zone's bounds and disk directory, as configured (`[[cache_zone]]`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ZoneSpec {
    pub(crate) name: String,
    /// Bytes of objects kept in memory.
    pub(crate) memory: u64,
    /// The directory of the zone's files; None: memory only.
    pub(crate) disk: Option<PathBuf>,
    /// Bytes of files kept on disk.
    pub(crate) disk_size: u64,
    /// Larger responses are delivered, never stored.
    pub(crate) max_object: u64,
    /// Objects unused this long are removed (zero: never).
    pub(crate) inactive: Duration,
}

/// Why a zone could not be made.
#[derive(Debug)]
pub(crate) struct ZoneError(String);

impl std::fmt::Display for ZoneError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

static ZONES: Mutex<Vec<Arc<Zone>>> = Mutex::new(Vec::new());

fn registry() -> MutexGuard<'static, Vec<Arc<Zone>>> {
    ZONES.lock().unwrap_or_else(|e| e.into_inner())
}

/// The zone named `spec.name`: the one already made (its bounds set to
/// `spec`'s) or a new one. A zone whose directory changed is made anew.
pub(crate) fn zone(spec: &ZoneSpec) -> Result<Arc<Zone>, ZoneError> {
    if disk::for_server() {
        // The privileged parent (see `give_dirs_to`): the directory, for
        // the server; nothing indexed, evicted or removed here.
        if let Some(dir) = &spec.disk {
            disk::make_for_server(dir).map_err(|e| {
                ZoneError(format!(
                    "cache zone `{}`: directory {}: {e}",
                    spec.name,
                    dir.display()
                ))
            })?;
        }
        return Zone::detached(spec);
    }
    let mut zones = registry();
    if let Some(i) = zones.iter().position(|z| z.name == spec.name) {
        if zones[i].disk.as_ref().map(|d| &d.dir) == spec.disk.as_ref() {
            let z = zones[i].clone();
            drop(zones);
            z.set_bounds(spec);
            return Ok(z);
        }
        zones.remove(i);
    }
    if let Some(dir) = &spec.disk {
        if let Some(other) = zones
            .iter()
            .find(|z| z.disk.as_ref().is_some_and(|d| &d.dir == dir))
        {
            return Err(ZoneError(format!(
                "cache zone `{}`: directory {} is zone `{}`'s already",
                spec.name,
                dir.display(),
                other.name
            )));
        }
    }
    let z = Zone::open(spec)?;
    zones.push(z.clone());
    Ok(z)
}

/// Drops the zones whose names are not in `names` (after a reload): their
/// objects go when the last route holding them does; files stay on disk.
pub(crate) fn retain(names: &[&str]) {
    registry().retain(|z| names.contains(&z.name.as_str()));
}

/// This process is the privileged parent: root, which reads the
/// configuration for a server process that runs as `uid`/`gid` (its
/// `user`) and serves nothing itself. The disk directories of the zones
/// its first load made are given to that account, as nginx's master does
/// for `proxy_cache_path`, so that the server writes its objects there;
/// those zones leave the registry, and from now on a load here (a reload)
/// only makes and gives directories. The parent never indexes, evicts or
/// removes what the server stores: an eviction by `inactive` here, where
/// no object is ever used, would remove every file at the next reload.
pub(crate) fn give_dirs_to(uid: u32, gid: u32) -> io::Result<()> {
    disk::set_owner(uid, gid);
    for z in std::mem::take(&mut *registry()) {
        if let Some(dir) = z.dir() {
            disk::give(dir)?;
        }
    }
    Ok(())
}

/// Every registered zone (the status page).
pub(crate) fn zones() -> Vec<Arc<Zone>> {
    registry().clone()
}

/// A primary key: its full bytes (compared whole), their hash (chosen by
/// the caller or [`StoreKey::new`]), and the URL it was made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoreKey {
    pub(crate) bytes: Box<[u8]>,
    pub(crate) hash: u64,
    pub(crate) url: Box<[u8]>,
}

impl StoreKey {
    /// A key whose hash is SipHash with a per-process random seed: a
    /// client cannot aim many keys at one bucket.
    pub(crate) fn new(bytes: &[u8], url: &[u8]) -> StoreKey {
        StoreKey {
            bytes: bytes.into(),
            hash: key_hash(bytes),
            url: url.into(),
        }
    }

    /// A key with a hash of the test's choosing (two keys whose hashes
    /// collide). Elsewhere the hash is always `new`'s: keys read back from
    /// disk are made by `new`.
    #[cfg(test)]
    pub(crate) fn with_hash(bytes: &[u8], hash: u64, url: &[u8]) -> StoreKey {
        StoreKey {
            bytes: bytes.into(),
            hash,
            url: url.into(),
        }
    }
}

/// The hash of a key's full bytes: SipHash with a per-process random
/// seed.
fn key_hash(bytes: &[u8]) -> u64 {
    static SEED: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    SEED.get_or_init(Default::default).hash_one(bytes)
}

/// What is stored of a response besides its body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Meta {
    pub(crate) status: u16,
    /// Header lines, each `Name: value\r\n`.
    pub(crate) head: Bytes,
    /// The secondary key (`Vary`), opaque to the store.
    pub(crate) variant: Box<[u8]>,
    pub(crate) request_time: SystemTime,
    pub(crate) response_time: SystemTime,
    /// Tags (`Surrogate-Key`) that `purge_tag` finds the object by.
    pub(crate) tags: Vec<Box<[u8]>>,
    /// The body's length: announced (or None) while a fill runs, the
    /// length stored once it is an object.
    pub(crate) len: Option<u64>,
}

/// A stored response.
#[derive(Debug)]
pub(crate) struct Object {
    pub(crate) meta: Meta,
    pub(crate) body: Body,
    key: StoreKey,
    /// Its identity in the index (kept by `update_meta`).
    id: u64,
    /// Its file, when the zone has a disk.
    disk: Option<Arc<DiskBody>>,
    /// What the request path derives from the head on first use (a hit
    /// parses nothing); never on disk, made again after a restart.
    pub(crate) derived: OnceLock<Derived>,
}

/// What the request path derives once from a stored head: its freshness
/// (RFC 9111 §4.2, under the rules of the route that used it first, as
/// nginx fixes `proxy_cache_valid` when it stores) and the head clients
/// get (`policy::client_head`).
#[derive(Debug)]
pub(crate) struct Derived {
    pub(crate) freshness: super::policy::Freshness,
    pub(crate) client_head: Bytes,
    /// The head has a `Vary` field (without one, the object matches a
    /// request exactly when its secondary key is empty).
    pub(crate) vary: bool,
}

/// Where an object's body is.
#[derive(Debug, Clone)]
pub(crate) enum Body {
    Mem(Bytes),
    Disk(Arc<DiskBody>),
}

/// An object's file: its body is `len` bytes at `at`.
#[derive(Debug)]
pub(crate) struct DiskBody {
    path: PathBuf,
    at: u64,
    len: u64,
    /// The file's size (the disk bound counts it).
    size: u64,
    /// The file while someone reads it: one descriptor for all readers,
    /// none for objects nobody reads.
    open: Mutex<Weak<File>>,
}

impl DiskBody {
    fn open(&self) -> io::Result<Arc<File>> {
        let mut w = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = w.upgrade() {
            return Ok(f);
        }
        let f = Arc::new(File::open(&self.path)?);
        *w = Arc::downgrade(&f);
        Ok(f)
    }
}

impl Object {
    /// The body's length.
    pub(crate) fn len(&self) -> u64 {
        match &self.body {
            Body::Mem(b) => b.len() as u64,
            Body::Disk(d) => d.len,
        }
    }

    /// The body in memory, if it is there.
    pub(crate) fn mem(&self) -> Option<&Bytes> {
        match &self.body {
            Body::Mem(b) => Some(b),
            Body::Disk(_) => None,
        }
    }

    /// The body as a range of its file (open, for sendfile): an error
    /// (the file was removed) is a miss.
    pub(crate) fn file(&self) -> io::Result<(Arc<File>, u64, u64)> {
        match self.disk.as_deref() {
            Some(d) => Ok((d.open()?, d.at, d.len)),
            None => Err(io::ErrorKind::NotFound.into()),
        }
    }

    /// Bytes it holds in memory (the memory bound).
    fn mem_size(&self) -> u64 {
        let body = self.mem().map_or(0, |b| b.len() as u64);
        body + self.meta.head.len() as u64 + self.key.bytes.len() as u64
    }
}

/// What a request found, for the zone's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    Hit,
    Miss,
    Expired,
    Stale,
    Revalidated,
    Bypass,
}

/// A zone's counters and sizes, as the status page shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    pub(crate) expired: u64,
    pub(crate) stale: u64,
    pub(crate) revalidated: u64,
    pub(crate) bypasses: u64,
    /// Objects removed by purges (URL or tag) and invalidations.
    pub(crate) purges: u64,
    /// Fills that should have been stored and were not (a disk error,
    /// bounds), and disk copies abandoned.
    pub(crate) store_failures: u64,
    pub(crate) objects: u64,
    pub(crate) memory_bytes: u64,
    pub(crate) disk_bytes: u64,
    /// The bounds (`memory`, `disk_size`; 0 without a disk).
    pub(crate) memory_limit: u64,
    pub(crate) disk_limit: u64,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    expired: AtomicU64,
    stale: AtomicU64,
    revalidated: AtomicU64,
    bypasses: AtomicU64,
    purges: AtomicU64,
    store_failures: AtomicU64,
}

/// The bounds a reload may change.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    memory: u64,
    disk_size: u64,
    max_object: u64,
    inactive: Duration,
}

/// A zone's disk: its directory and the generation its file names take
/// (unique, so that a file is only ever its own object's).
#[derive(Debug)]
struct Disk {
    dir: PathBuf,
    generation: AtomicU64,
}

/// A cache zone (see the module's documentation).
pub(crate) struct Zone {
    name: String,
    disk: Option<Disk>,
    index: Mutex<Index>,
    counters: Counters,
    /// The disk index is being rebuilt (objects appear as it goes).
    loading: AtomicBool,
    /// Tests: disk writes fail after this many more bytes (ENOSPC).
    #[cfg(test)]
    write_budget: AtomicU64,
}

impl std::fmt::Debug for Zone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zone").field("name", &self.name).finish()
    }
}

/// The index: primary keys by hash (full bytes compared), the objects'
/// places, the two LRU orders, tags and URLs.
struct Index {
    bounds: Bounds,
    keys: FxHashMap<u64, Vec<Primary>>,
    /// Object id -> its key's hash.
    objects: FxHashMap<u64, u64>,
    /// Last use -> object id, for objects with a memory body.
    mem_lru: BTreeMap<u64, u64>,
    /// Last use -> object id, for objects with a file.
    disk_lru: BTreeMap<u64, u64>,
    tags: FxHashMap<Box<[u8]>, FxHashSet<u64>>,
    urls: FxHashMap<Box<[u8]>, FxHashSet<u64>>,
    clock: u64,
    next_id: u64,
    /// Hit-for-miss marks set since the last sweep of expired ones.
    marks: u64,
    mem_bytes: u64,
    disk_bytes: u64,
}

struct Primary {
    key: Box<[u8]>,
    variants: Vec<Entry>,
    fill: Option<Arc<Fill>>,
    uncacheable_until: Option<Instant>,
}

struct Entry {
    obj: Arc<Object>,
    tick: u64,
    used: Instant,
}

/// Files to remove once the index is unlocked.
type Unlinks = Vec<PathBuf>;

fn unlink_all(paths: Unlinks) {
    for p in paths {
        let _ = std::fs::remove_file(p);
    }
}

impl Index {
    fn new(b: Bounds) -> Index {
        Index {
            bounds: b,
            keys: FxHashMap::default(),
            objects: FxHashMap::default(),
            mem_lru: BTreeMap::new(),
            disk_lru: BTreeMap::new(),
            tags: FxHashMap::default(),
            urls: FxHashMap::default(),
            clock: 0,
            next_id: 1,
            marks: 0,
            mem_bytes: 0,
            disk_bytes: 0,
        }
    }

    fn primary(&mut self, key: &StoreKey) -> Option<&mut Primary> {
        self.primary_raw(key.hash, &key.bytes)
    }

    fn primary_raw(&mut self, hash: u64, bytes: &[u8]) -> Option<&mut Primary> {
        self.keys
            .get_mut(&hash)?
            .iter_mut()
            .find(|p| *p.key == *bytes)
    }

    fn primary_or_new(&mut self, key: &StoreKey) -> &mut Primary {
        let bucket = self.keys.entry(key.hash).or_default();
        let i = match bucket.iter().position(|p| *p.key == *key.bytes) {
            Some(i) => i,
            None => {
                bucket.push(Primary {
                    key: key.bytes.clone(),
                    variants: Vec::new(),
                    fill: None,
                    uncacheable_until: None,
                });
                bucket.len() - 1
            }
        };
        &mut bucket[i]
    }

    /// Forgets a primary key that holds nothing any more.
    fn tidy(&mut self, key: &StoreKey) {
        if let Some(bucket) = self.keys.get_mut(&key.hash) {
            bucket.retain(|p| {
                !p.variants.is_empty() || p.fill.is_some() || p.uncacheable_until.is_some()
            });
            if bucket.is_empty() {
                self.keys.remove(&key.hash);
            }
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Adds an object as its key's most recent variant (replacing one of
    /// the same variant); the files of what it replaced go to `unlinks`.
    fn insert(&mut self, obj: Arc<Object>, now: Instant, unlinks: &mut Unlinks) {
        let tick = self.tick();
        let key = obj.key.clone();
        let same: Vec<u64> = self.primary(&key).map_or(Vec::new(), |p| {
            let mut v: Vec<u64> = p
                .variants
                .iter()
                .filter(|e| e.obj.meta.variant == obj.meta.variant)
                .map(|e| e.obj.id)
                .collect();
            v.extend(p.variants.iter().skip(MAX_VARIANTS - 1).map(|e| e.obj.id));
            v
        });
        for id in same {
            self.remove_id(id, unlinks);
        }
        self.account(&obj, tick, true);
        self.primary_or_new(&key).variants.insert(
            0,
            Entry {
                obj,
                tick,
                used: now,
            },
        );
    }

    /// Adds an object's sizes, LRU places, tags and URL.
    fn account(&mut self, obj: &Arc<Object>, tick: u64, add_refs: bool) {
        if obj.mem().is_some() {
            self.mem_bytes += obj.mem_size();
            self.mem_lru.insert(tick, obj.id);
        }
        if let Some(d) = &obj.disk {
            self.disk_bytes += d.size;
            self.disk_lru.insert(tick, obj.id);
        }
        if add_refs {
            self.objects.insert(obj.id, obj.key.hash);
            for t in &obj.meta.tags {
                self.tags.entry(t.clone()).or_default().insert(obj.id);
            }
            self.urls
                .entry(obj.key.url.clone())
                .or_default()
                .insert(obj.id);
        }
    }

    /// Takes an object's sizes, LRU places (and tags and URL) away.
    fn unaccount(&mut self, obj: &Object, tick: u64, refs: bool) {
        if obj.mem().is_some() {
            self.mem_bytes -= obj.mem_size();
            self.mem_lru.remove(&tick);
        }
        if let Some(d) = &obj.disk {
            self.disk_bytes -= d.size;
            self.disk_lru.remove(&tick);
        }
        if refs {
            self.objects.remove(&obj.id);
            for t in &obj.meta.tags {
                if let Some(s) = self.tags.get_mut(t) {
                    s.remove(&obj.id);
                    if s.is_empty() {
                        self.tags.remove(t);
                    }
                }
            }
            if let Some(s) = self.urls.get_mut(&obj.key.url) {
                s.remove(&obj.id);
                if s.is_empty() {
                    self.urls.remove(&obj.key.url);
                }
            }
        }
    }

    /// Where object `id` is: its key's hash, the primary's and the
    /// variant's positions.
    fn find(&self, id: u64) -> Option<(u64, usize, usize)> {
        let hash = *self.objects.get(&id)?;
        let bucket = self.keys.get(&hash)?;
        bucket.iter().enumerate().find_map(|(i, p)| {
            p.variants
                .iter()
                .position(|e| e.obj.id == id)
                .map(|j| (hash, i, j))
        })
    }

    /// Removes object `id`: whether it was there.
    fn remove_id(&mut self, id: u64, unlinks: &mut Unlinks) -> bool {
        let Some((hash, i, j)) = self.find(id) else {
            return false;
        };
        let Some(bucket) = self.keys.get_mut(&hash) else {
            return false;
        };
        let e = bucket[i].variants.remove(j);
        let key = e.obj.key.clone();
        self.unaccount(&e.obj, e.tick, true);
        if let Some(d) = &e.obj.disk {
            unlinks.push(d.path.clone());
        }
        self.tidy(&key);
        true
    }

    /// Marks object `id` used now; its entry.
    fn touch(&mut self, id: u64, now: Instant) {
        let Some((hash, i, j)) = self.find(id) else {
            return;
        };
        let tick = self.tick();
        let Some(e) = self
            .keys
            .get_mut(&hash)
            .and_then(|b| b.get_mut(i))
            .and_then(|p| p.variants.get_mut(j))
        else {
            return;
        };
        let old = std::mem::replace(&mut e.tick, tick);
        e.used = now;
        let (mem, disk) = (e.obj.mem().is_some(), e.obj.disk.is_some());
        if mem {
            self.mem_lru.remove(&old);
            self.mem_lru.insert(tick, id);
        }
        if disk {
            self.disk_lru.remove(&old);
            self.disk_lru.insert(tick, id);
        }
    }

    /// Puts `new` in the place of object `id` (same key and identity).
    fn replace(&mut self, id: u64, new: Arc<Object>, now: Instant) -> Option<Arc<Object>> {
        let (hash, i, j) = self.find(id)?;
        let tick = self.tick();
        let e = self.keys.get_mut(&hash)?.get_mut(i)?.variants.get_mut(j)?;
        let old = std::mem::replace(&mut e.obj, new.clone());
        let old_tick = std::mem::replace(&mut e.tick, tick);
        e.used = now;
        self.unaccount(&old, old_tick, true);
        self.account(&new, tick, true);
        Some(old)
    }

    /// Evicts until the bounds hold, and what has been unused for
    /// `inactive`.
    fn enforce(&mut self, now: Instant, unlinks: &mut Unlinks) {
        let inactive = self.bounds.inactive;
        if !inactive.is_zero() {
            loop {
                let oldest = [
                    self.mem_lru.first_key_value(),
                    self.disk_lru.first_key_value(),
                ]
                .into_iter()
                .flatten()
                .min()
                .map(|(_, id)| *id);
                let Some(id) = oldest else { break };
                let used = self
                    .find(id)
                    .and_then(|(h, i, j)| Some(self.keys.get(&h)?.get(i)?.variants.get(j)?.used));
                match used {
                    Some(u) if now.saturating_duration_since(u) >= inactive => {
                        self.remove_id(id, unlinks);
                    }
                    _ => break,
                }
            }
        }
        while self.disk_bytes > self.bounds.disk_size {
            let Some((_, &id)) = self.disk_lru.first_key_value() else {
                break;
            };
            self.remove_id(id, unlinks);
        }
        while self.mem_bytes > self.bounds.memory {
            let Some((_, &id)) = self.mem_lru.first_key_value() else {
                break;
            };
            // An object with a file leaves memory only.
            let on_disk = self
                .find(id)
                .and_then(|(h, i, j)| self.keys.get(&h)?.get(i)?.variants.get(j))
                .and_then(|e| Some((e.obj.clone(), e.obj.disk.clone()?)));
            match on_disk {
                Some((obj, d)) => {
                    let lighter = Arc::new(Object {
                        meta: obj.meta.clone(),
                        body: Body::Disk(d.clone()),
                        key: obj.key.clone(),
                        id: obj.id,
                        disk: Some(d),
                        derived: OnceLock::new(),
                    });
                    let (h, i, j) = match self.find(id) {
                        Some(p) => p,
                        None => break,
                    };
                    let Some(e) = self
                        .keys
                        .get_mut(&h)
                        .and_then(|b| b.get_mut(i))
                        .and_then(|p| p.variants.get_mut(j))
                    else {
                        break;
                    };
                    let tick = e.tick;
                    e.obj = lighter.clone();
                    self.unaccount(&obj, tick, false);
                    self.account(&lighter, tick, false);
                }
                None => {
                    self.remove_id(id, unlinks);
                }
            }
        }
    }

    fn objects(&self) -> u64 {
        self.objects.len() as u64
    }
}

impl Zone {
    /// A memory-only zone outside the registry (`stoa check`, tests):
    /// nothing is read from or written to `spec.disk`.
    pub(crate) fn detached(spec: &ZoneSpec) -> Result<Arc<Zone>, ZoneError> {
        let spec = ZoneSpec {
            disk: None,
            ..spec.clone()
        };
        Zone::open(&spec)
    }

    /// A zone outside the registry on `spec.disk` (created if missing),
    /// its index rebuilt from the files there by a background thread.
    pub(crate) fn open(spec: &ZoneSpec) -> Result<Arc<Zone>, ZoneError> {
        let disk = match &spec.disk {
            Some(dir) => {
                disk::prepare(dir).map_err(|e| {
                    ZoneError(format!(
                        "cache zone `{}`: directory {}: {e}",
                        spec.name,
                        dir.display()
                    ))
                })?;
                Some(Disk {
                    dir: dir.clone(),
                    generation: AtomicU64::new(disk::first_generation()),
                })
            }
            None => None,
        };
        let z = Arc::new(Zone {
            name: spec.name.clone(),
            loading: AtomicBool::new(disk.is_some()),
            disk,
            index: Mutex::new(Index::new(bounds(spec))),
            counters: Counters::default(),
            #[cfg(test)]
            write_budget: AtomicU64::new(u64::MAX),
        });
        if let Some(d) = &z.disk {
            let weak = Arc::downgrade(&z);
            let dir = d.dir.clone();
            let started = std::thread::Builder::new()
                .name(format!("cache-load-{}", spec.name))
                .spawn(move || disk::load(&dir, &weak));
            if let Err(e) = started {
                z.loading.store(false, Ordering::Release);
                return Err(ZoneError(format!("cache zone `{}`: {e}", spec.name)));
            }
        }
        Ok(z)
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    #[cfg(test)]
    /// Whether the disk index is still being rebuilt (objects on disk
    /// may not be found yet: misses, never wrong answers).
    pub(crate) fn loading(&self) -> bool {
        self.loading.load(Ordering::Acquire)
    }

    fn index(&self) -> MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// New bounds (a reload); what no longer fits goes.
    fn set_bounds(&self, spec: &ZoneSpec) {
        let mut unlinks = Vec::new();
        {
            let mut ix = self.index();
            ix.bounds = bounds(spec);
            ix.enforce(Instant::now(), &mut unlinks);
        }
        unlink_all(unlinks);
    }

    fn bounds(&self) -> Bounds {
        self.index().bounds
    }

    /// The largest object the zone stores (`max_object`): a response
    /// announced larger is passed through.
    pub(crate) fn max_object(&self) -> u64 {
        self.bounds().max_object
    }

    #[cfg(test)]
    /// The stored variants of `key`'s primary key, most recent first;
    /// each counts as used.
    pub(crate) fn lookup(&self, key: &StoreKey) -> Vec<Arc<Object>> {
        self.lookup_raw(key.hash, &key.bytes)
    }

    /// [`Zone::lookup`] by a primary key's full bytes alone (a hit needs
    /// no `StoreKey`: no URL, no copies).
    pub(crate) fn lookup_bytes(&self, bytes: &[u8]) -> Vec<Arc<Object>> {
        self.lookup_raw(key_hash(bytes), bytes)
    }

    fn lookup_raw(&self, hash: u64, bytes: &[u8]) -> Vec<Arc<Object>> {
        let now = Instant::now();
        let mut unlinks = Vec::new();
        let found = {
            let mut ix = self.index();
            let inactive = ix.bounds.inactive;
            let Some(p) = ix.primary_raw(hash, bytes) else {
                return Vec::new();
            };
            let mut found = Vec::with_capacity(p.variants.len());
            let mut old = Vec::new();
            for e in &p.variants {
                if !inactive.is_zero() && now.saturating_duration_since(e.used) >= inactive {
                    old.push(e.obj.id);
                } else {
                    found.push(e.obj.clone());
                }
            }
            for id in old {
                ix.remove_id(id, &mut unlinks);
            }
            for o in &found {
                ix.touch(o.id, now);
            }
            found
        };
        unlink_all(unlinks);
        found
    }

    /// Starts a fill of `key`, joins the one running, or says the key is
    /// fetched uncollapsed for now ([`Zone::mark_uncacheable`]).
    pub(crate) fn begin(self: &Arc<Self>, key: &StoreKey) -> Begin {
        let now = Instant::now();
        let fill = {
            let mut ix = self.index();
            let p = ix.primary_or_new(key);
            if let Some(f) = &p.fill {
                return Begin::Wait(f.clone());
            }
            if let Some(until) = p.uncacheable_until {
                if now < until {
                    return Begin::Uncacheable;
                }
                p.uncacheable_until = None;
            }
            let f = Arc::new(Fill::new());
            p.fill = Some(f.clone());
            f
        };
        Begin::Lead(FillGuard::new(self.clone(), key.clone(), fill))
    }

    /// For `ttl`, requests for `key` are not collapsed: each fetches on
    /// its own (Varnish's hit-for-miss, after a response that could not
    /// be stored).
    pub(crate) fn mark_uncacheable(&self, key: &StoreKey, ttl: Duration) {
        let now = Instant::now();
        let mut ix = self.index();
        ix.primary_or_new(key).uncacheable_until = Some(now + ttl);
        // Marks of keys never asked for again would stay: now and then,
        // the expired ones go (a pass over the keys per 4096 marks).
        ix.marks += 1;
        if ix.marks >= 4096 {
            ix.marks = 0;
            ix.keys.retain(|_, bucket| {
                for p in bucket.iter_mut() {
                    if p.uncacheable_until.is_some_and(|u| u <= now) {
                        p.uncacheable_until = None;
                    }
                }
                bucket.retain(|p| {
                    !p.variants.is_empty() || p.fill.is_some() || p.uncacheable_until.is_some()
                });
                !bucket.is_empty()
            });
        }
    }

    /// A fill of `key` ended: it is no longer the key's, and `obj` (if
    /// any) is stored. Whether it was.
    fn end_fill(&self, key: &StoreKey, fill: &Arc<Fill>, obj: Option<Arc<Object>>) -> bool {
        let now = Instant::now();
        let mut unlinks = Vec::new();
        let stored = {
            let mut ix = self.index();
            if let Some(p) = ix.primary(key) {
                if p.fill.as_ref().is_some_and(|f| Arc::ptr_eq(f, fill)) {
                    p.fill = None;
                }
            }
            let stored = match obj {
                Some(o) => {
                    let id = o.id;
                    ix.insert(o, now, &mut unlinks);
                    ix.enforce(now, &mut unlinks);
                    ix.objects.contains_key(&id)
                }
                None => false,
            };
            ix.tidy(key);
            stored
        };
        unlink_all(unlinks);
        stored
    }

    fn next_id(&self) -> u64 {
        let mut ix = self.index();
        ix.next_id += 1;
        ix.next_id
    }

    /// `old` with new fields (a 304 that revalidated it, RFC 9111
    /// §4.3.4), its body kept, in its place; `meta.len` is the body's.
    /// The file is rewritten (a new name) when it has one. An object
    /// removed meanwhile is not put back.
    pub(crate) fn update_meta(&self, old: &Arc<Object>, mut meta: Meta) -> Arc<Object> {
        meta.len = Some(old.len());
        let disk = match (&self.disk, &old.disk) {
            (Some(zd), Some(d)) => match disk::rewrite(self, zd, &old.key, &meta, d) {
                Ok(n) => Some(Arc::new(n)),
                Err(e) => {
                    self.count_store_failure();
                    tracing::warn!(zone = %self.name, "cache: rewriting {}: {e}", d.path.display());
                    None
                }
            },
            _ => None,
        };
        let body = match (&old.body, &disk) {
            (Body::Mem(b), _) => Body::Mem(b.clone()),
            (Body::Disk(_), Some(d)) => Body::Disk(d.clone()),
            // The file could not be rewritten: the refreshed response is
            // delivered, the stored one stays as it was.
            (Body::Disk(d), None) => {
                return Arc::new(Object {
                    meta,
                    body: Body::Disk(d.clone()),
                    key: old.key.clone(),
                    id: old.id,
                    disk: old.disk.clone(),
                    derived: OnceLock::new(),
                });
            }
        };
        let new = Arc::new(Object {
            meta,
            body,
            key: old.key.clone(),
            id: old.id,
            disk,
            derived: OnceLock::new(),
        });
        let now = Instant::now();
        let mut unlinks = Vec::new();
        {
            let mut ix = self.index();
            // The same id is the same stored response (perhaps with its
            // memory copy dropped since).
            if let Some(replaced) = ix.replace(old.id, new.clone(), now) {
                if let Some(d) = &replaced.disk {
                    if new.disk.as_ref().is_none_or(|n| n.path != d.path) {
                        unlinks.push(d.path.clone());
                    }
                }
                ix.enforce(now, &mut unlinks);
            } else if let Some(d) = &new.disk {
                if old.disk.as_ref().is_none_or(|o| o.path != d.path) {
                    unlinks.push(d.path.clone());
                }
            }
        }
        unlink_all(unlinks);
        new
    }

    #[cfg(test)]
    /// Removes every stored variant of `key`; how many there were.
    pub(crate) fn remove(&self, key: &StoreKey) -> usize {
        let mut unlinks = Vec::new();
        let n = {
            let mut ix = self.index();
            let ids: Vec<u64> = ix.primary(key).map_or(Vec::new(), |p| {
                p.variants.iter().map(|e| e.obj.id).collect()
            });
            ids.into_iter()
                .filter(|&id| ix.remove_id(id, &mut unlinks))
                .count()
        };
        unlink_all(unlinks);
        self.counters.purges.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Removes one stored object (if it is still stored); whether it was.
    pub(crate) fn remove_object(&self, obj: &Object) -> bool {
        let mut unlinks = Vec::new();
        let removed = self.index().remove_id(obj.id, &mut unlinks);
        unlink_all(unlinks);
        removed
    }

    /// Removes every variant of every key made from `url`; how many.
    pub(crate) fn purge_url(&self, url: &[u8]) -> usize {
        self.purge_ids(|ix| ix.urls.get(url).map(|s| s.iter().copied().collect()))
    }

    /// Removes every object tagged `tag`; how many.
    pub(crate) fn purge_tag(&self, tag: &[u8]) -> usize {
        self.purge_ids(|ix| ix.tags.get(tag).map(|s| s.iter().copied().collect()))
    }

    fn purge_ids(&self, ids: impl FnOnce(&Index) -> Option<Vec<u64>>) -> usize {
        let mut unlinks = Vec::new();
        let n = {
            let mut ix = self.index();
            let ids = ids(&ix).unwrap_or_default();
            ids.into_iter()
                .filter(|&id| ix.remove_id(id, &mut unlinks))
                .count()
        };
        unlink_all(unlinks);
        self.counters.purges.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Counts what a request found.
    pub(crate) fn count(&self, e: Event) {
        let c = &self.counters;
        let a = match e {
            Event::Hit => &c.hits,
            Event::Miss => &c.misses,
            Event::Expired => &c.expired,
            Event::Stale => &c.stale,
            Event::Revalidated => &c.revalidated,
            Event::Bypass => &c.bypasses,
        };
        a.fetch_add(1, Ordering::Relaxed);
    }

    fn count_store_failure(&self) {
        self.counters.store_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// The zone's counters and sizes now.
    pub(crate) fn stats(&self) -> Stats {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (objects, memory_bytes, disk_bytes, b) = {
            let ix = self.index();
            (ix.objects(), ix.mem_bytes, ix.disk_bytes, ix.bounds)
        };
        Stats {
            hits: l(&c.hits),
            misses: l(&c.misses),
            expired: l(&c.expired),
            stale: l(&c.stale),
            revalidated: l(&c.revalidated),
            bypasses: l(&c.bypasses),
            purges: l(&c.purges),
            store_failures: l(&c.store_failures),
            objects,
            memory_bytes,
            disk_bytes,
            memory_limit: b.memory,
            disk_limit: if self.disk.is_some() { b.disk_size } else { 0 },
        }
    }

    /// The zone's directory, if it has one.
    fn dir(&self) -> Option<&Path> {
        self.disk.as_ref().map(|d| d.dir.as_path())
    }

    /// Stores an object read back from disk at start, unless a newer one
    /// of the same key and variant is there (then its file goes).
    fn adopt(&self, key: StoreKey, meta: Meta, d: DiskBody) {
        let now = Instant::now();
        let mut unlinks = Vec::new();
        {
            let mut ix = self.index();
            let newer = ix.primary(&key).is_some_and(|p| {
                p.variants.iter().any(|e| {
                    e.obj.meta.variant == meta.variant
                        && e.obj.meta.response_time >= meta.response_time
                })
            });
            if newer {
                unlinks.push(d.path.clone());
            } else {
                ix.next_id += 1;
                let d = Arc::new(d);
                let obj = Arc::new(Object {
                    meta,
                    body: Body::Disk(d.clone()),
                    key,
                    id: ix.next_id,
                    disk: Some(d),
                    derived: OnceLock::new(),
                });
                ix.insert(obj, now, &mut unlinks);
                ix.enforce(now, &mut unlinks);
            }
        }
        unlink_all(unlinks);
    }
}

fn bounds(spec: &ZoneSpec) -> Bounds {
    Bounds {
        memory: spec.memory,
        disk_size: spec.disk_size,
        max_object: spec.max_object,
        inactive: spec.inactive,
    }
}

#[cfg(test)]
impl Zone {
    /// Disk writes of this zone's copies fail (ENOSPC) past `bytes` more.
    pub(super) fn set_write_budget(&self, bytes: u64) {
        self.write_budget.store(bytes, Ordering::Relaxed);
    }

    pub(super) fn take_write_budget(&self, n: u64) -> io::Result<()> {
        let left = self.write_budget.load(Ordering::Relaxed);
        if left < n {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        self.write_budget.store(left - n, Ordering::Relaxed);
        Ok(())
    }
}
