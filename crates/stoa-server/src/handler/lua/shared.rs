//! `stoa.shared.NAME`: dictionaries shared by every worker of the server
//! (OpenResty's `ngx.shared.DICT`), for counters, rate limits and caches
//! that one worker's interpreter cannot hold alone.
//!
//! Each is a map under a mutex, held only for one call (a hash lookup and
//! a copy). Its size is bounded: every entry counts its key, its value and
//! [`OVERHEAD`] bytes; a `set` that would pass the bound removes expired
//! entries, then the least recently written ones. Dictionaries live in a
//! process-wide registry by name, so a reload (SIGHUP) keeps their
//! contents (with the new size).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What an entry costs beyond its key and value: the map's slot, the
/// eviction index, the allocation headers.
pub const OVERHEAD: usize = 96;

/// A value kept in a dictionary.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    Bool(bool),
    Int(i64),
    Num(f64),
    Str(Box<[u8]>),
}

impl Stored {
    fn size(&self) -> usize {
        match self {
            Stored::Str(s) => s.len(),
            _ => 8,
        }
    }
}

struct Entry {
    value: Stored,
    expires: Option<Instant>,
    /// Its key in `Inner::order`: when it was last written.
    seq: u64,
}

#[derive(Default)]
struct Inner {
    map: HashMap<Box<[u8]>, Entry>,
    /// Keys by write order, oldest first: what `set` evicts.
    order: BTreeMap<u64, Box<[u8]>>,
    seq: u64,
    used: usize,
    capacity: usize,
}

/// One named dictionary.
pub struct Dict {
    pub name: String,
    inner: Mutex<Inner>,
}

/// Why a write failed.
#[derive(Debug, PartialEq)]
pub enum SetError {
    /// The entry alone is larger than the dictionary.
    NoMemory,
    /// `incr` of a value that is not a number.
    NotANumber,
}

impl std::fmt::Display for SetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SetError::NoMemory => "no memory",
            SetError::NotANumber => "not a number",
        })
    }
}

fn cost(key: &[u8], v: &Stored) -> usize {
    key.len() + v.size() + OVERHEAD
}

impl Inner {
    fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let e = self.map.remove(key)?;
        self.order.remove(&e.seq);
        self.used -= cost(key, &e.value);
        Some(e)
    }

    /// The live entry for `key` (an expired one is removed).
    fn live(&mut self, key: &[u8], now: Instant) -> Option<&mut Entry> {
        let expired = self
            .map
            .get(key)
            .is_some_and(|e| e.expires.is_some_and(|t| t <= now));
        if expired {
            self.remove(key);
        }
        self.map.get_mut(key)
    }

    /// Room for `need` more bytes: expired entries go first, then the
    /// least recently written.
    fn make_room(&mut self, need: usize, now: Instant) -> bool {
        if need > self.capacity {
            return false;
        }
        if self.used + need <= self.capacity {
            return true;
        }
        let expired: Vec<Box<[u8]>> = self
            .map
            .iter()
            .filter(|(_, e)| e.expires.is_some_and(|t| t <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for k in expired {
            self.remove(&k);
        }
        while self.used + need > self.capacity {
            let Some((_, k)) = self.order.pop_first() else {
                break;
            };
            if let Some(e) = self.map.remove(&k) {
                self.used -= cost(&k, &e.value);
            }
        }
        self.used + need <= self.capacity
    }

    fn put(&mut self, key: &[u8], value: Stored, expires: Option<Instant>, now: Instant) -> bool {
        self.remove(key);
        let need = cost(key, &value);
        if !self.make_room(need, now) {
            return false;
        }
        self.seq += 1;
        let k: Box<[u8]> = key.into();
        self.order.insert(self.seq, k.clone());
        self.map.insert(
            k,
            Entry {
                value,
                expires,
                seq: self.seq,
            },
        );
        self.used += need;
        true
    }
}

fn expiry(ttl: Option<Duration>, now: Instant) -> Option<Instant> {
    ttl.filter(|d| !d.is_zero()).map(|d| now + d)
}

impl Dict {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock left a consistent map (every
        // change is made whole before anything can panic): go on.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, key: &[u8]) -> Option<Stored> {
        let now = Instant::now();
        self.lock().live(key, now).map(|e| e.value.clone())
    }

    /// Stores `value` (None: deletes) for `ttl` (None or zero: forever).
    pub fn set(
        &self,
        key: &[u8],
        value: Option<Stored>,
        ttl: Option<Duration>,
    ) -> Result<(), SetError> {
        let now = Instant::now();
        let mut d = self.lock();
        match value {
            None => {
                d.remove(key);
                Ok(())
            }
            Some(v) => {
                if d.put(key, v, expiry(ttl, now), now) {
                    Ok(())
                } else {
                    Err(SetError::NoMemory)
                }
            }
        }
    }

    /// Adds `by` to the number at `key` (missing: `init`, which expires
    /// after `ttl`); the new value. An existing entry keeps its expiry.
    pub fn incr(
        &self,
        key: &[u8],
        by: Stored,
        init: Stored,
        ttl: Option<Duration>,
    ) -> Result<Stored, SetError> {
        let now = Instant::now();
        let mut d = self.lock();
        let (old, expires) = match d.live(key, now) {
            Some(e) => (e.value.clone(), e.expires),
            None => (init, expiry(ttl, now)),
        };
        let new = match (&old, &by) {
            (Stored::Int(a), Stored::Int(b)) => match a.checked_add(*b) {
                Some(n) => Stored::Int(n),
                None => Stored::Num(*a as f64 + *b as f64),
            },
            (Stored::Int(a), Stored::Num(b)) => Stored::Num(*a as f64 + b),
            (Stored::Num(a), Stored::Int(b)) => Stored::Num(a + *b as f64),
            (Stored::Num(a), Stored::Num(b)) => Stored::Num(a + b),
            _ => return Err(SetError::NotANumber),
        };
        // In place when the entry exists: a counter is not "written" for
        // eviction's sake more than once, and its size does not change.
        if let Some(e) = d.map.get_mut(key) {
            e.value = new.clone();
            return Ok(new);
        }
        if d.put(key, new.clone(), expires, now) {
            Ok(new)
        } else {
            Err(SetError::NoMemory)
        }
    }

    pub fn delete(&self, key: &[u8]) {
        self.lock().remove(key);
    }

    /// Bytes in use and the bound.
    #[cfg(test)]
    pub fn usage(&self) -> (usize, usize) {
        let d = self.lock();
        (d.used, d.capacity)
    }
}

/// The dictionary `name` of this process with `capacity` bytes: the one a
/// previous config made (its contents kept, trimmed to the new size), or
/// a new one.
pub fn dict(name: &str, capacity: usize) -> Arc<Dict> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Arc<Dict>>>> = OnceLock::new();
    let mut reg = REGISTRY
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let d = reg
        .entry(name.to_owned())
        .or_insert_with(|| {
            Arc::new(Dict {
                name: name.to_owned(),
                inner: Mutex::new(Inner::default()),
            })
        })
        .clone();
    {
        let mut i = d.lock();
        i.capacity = capacity;
        let now = Instant::now();
        i.make_room(0, now);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(cap: usize) -> Dict {
        Dict {
            name: "t".into(),
            inner: Mutex::new(Inner {
                capacity: cap,
                ..Inner::default()
            }),
        }
    }

    #[test]
    fn set_get_delete_and_ttl() {
        let d = fresh(4096);
        d.set(b"a", Some(Stored::Str(b"x".to_vec().into())), None)
            .unwrap();
        assert_eq!(d.get(b"a"), Some(Stored::Str(b"x".to_vec().into())));
        d.delete(b"a");
        assert_eq!(d.get(b"a"), None);
        d.set(b"t", Some(Stored::Int(1)), Some(Duration::from_millis(20)))
            .unwrap();
        assert_eq!(d.get(b"t"), Some(Stored::Int(1)));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(d.get(b"t"), None);
        assert_eq!(d.usage().0, 0);
    }

    #[test]
    fn incr_starts_at_init_and_refuses_strings() {
        let d = fresh(4096);
        assert_eq!(
            d.incr(b"c", Stored::Int(1), Stored::Int(0), None),
            Ok(Stored::Int(1))
        );
        assert_eq!(
            d.incr(b"c", Stored::Int(5), Stored::Int(0), None),
            Ok(Stored::Int(6))
        );
        assert_eq!(
            d.incr(b"c", Stored::Num(0.5), Stored::Int(0), None),
            Ok(Stored::Num(6.5))
        );
        d.set(b"s", Some(Stored::Str(b"x".to_vec().into())), None)
            .unwrap();
        assert_eq!(
            d.incr(b"s", Stored::Int(1), Stored::Int(0), None),
            Err(SetError::NotANumber)
        );
    }

    #[test]
    fn the_bound_evicts_the_least_recently_written() {
        let per = cost(b"k0", &Stored::Int(0));
        let d = fresh(per * 3);
        for i in 0..5 {
            d.set(format!("k{i}").as_bytes(), Some(Stored::Int(i)), None)
                .unwrap();
        }
        assert_eq!(d.get(b"k0"), None);
        assert_eq!(d.get(b"k1"), None);
        assert_eq!(d.get(b"k4"), Some(Stored::Int(4)));
        assert!(d.usage().0 <= d.usage().1);
        // Larger than the whole dictionary.
        let big = Stored::Str(vec![0; per * 4].into());
        assert_eq!(d.set(b"big", Some(big), None), Err(SetError::NoMemory));
    }

    #[test]
    fn workers_on_threads_count_together() {
        let d = Arc::new(fresh(4096));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let d = d.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        d.incr(b"n", Stored::Int(1), Stored::Int(0), None).unwrap();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(d.get(b"n"), Some(Stored::Int(4000)));
    }
}
