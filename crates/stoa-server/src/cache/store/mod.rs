//! STAND-IN until the store branch merges: a memory-only zone registry,
//! objects and fills with collapsed forwarding, in the shape of
//! HELPERS.md, so the request path can be built and tested end to end.

use super::key::Key;
use bytes::Bytes;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ZoneSpec {
    pub(crate) name: String,
    pub(crate) memory: u64,
    pub(crate) disk: Option<PathBuf>,
    pub(crate) disk_size: u64,
    pub(crate) max_object: u64,
    pub(crate) inactive: Duration,
}

#[derive(Debug)]
pub(crate) struct ZoneError(String);

impl std::fmt::Display for ZoneError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

static ZONES: Mutex<Vec<Arc<Zone>>> = Mutex::new(Vec::new());

pub(crate) fn zone(spec: &ZoneSpec) -> Result<Arc<Zone>, ZoneError> {
    let mut z = ZONES.lock().map_err(|_| ZoneError("poisoned".into()))?;
    if let Some(found) = z.iter().find(|z| z.spec.name == spec.name) {
        return Ok(found.clone());
    }
    let new = Zone::detached(spec)?;
    z.push(new.clone());
    Ok(new)
}

#[derive(Debug)]
pub(crate) struct Zone {
    spec: ZoneSpec,
    map: Mutex<HashMap<Key, Slot>>,
}

#[derive(Debug)]
enum Slot {
    Stored(Arc<Object>),
    Filling(Arc<Fill>),
}

/// What is stored of a response.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub(crate) status: u16,
    /// Header lines as `Name: value\r\n`.
    pub(crate) head: Bytes,
    pub(crate) request_time: SystemTime,
    pub(crate) response_time: SystemTime,
    /// Freshness lifetime (stand-in: the real store keeps the head and
    /// policy computes it).
    pub(crate) ttl: Duration,
    /// The body's length when the application announced it.
    pub(crate) len: Option<u64>,
}

#[derive(Debug)]
pub(crate) struct Object {
    pub(crate) meta: Meta,
    pub(crate) body: Bytes,
}

pub(crate) enum Begin {
    Lead(FillGuard),
    Wait(Arc<Fill>),
}

impl Zone {
    pub(crate) fn detached(spec: &ZoneSpec) -> Result<Arc<Zone>, ZoneError> {
        Ok(Arc::new(Zone {
            spec: spec.clone(),
            map: Mutex::new(HashMap::new()),
        }))
    }

    pub(crate) fn name(&self) -> &str {
        &self.spec.name
    }

    pub(crate) fn lookup(&self, key: &Key) -> Option<Arc<Object>> {
        match self.map.lock().ok()?.get(key) {
            Some(Slot::Stored(o)) => Some(o.clone()),
            _ => None,
        }
    }

    /// Removes the object stored under `key`; whether there was one.
    pub(crate) fn remove(&self, key: &Key) -> bool {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        matches!(m.remove(key), Some(Slot::Stored(_)))
    }

    pub(crate) fn begin(self: &Arc<Self>, key: &Key) -> Begin {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(Slot::Filling(f)) = m.get(key) {
            return Begin::Wait(f.clone());
        }
        let fill = Arc::new(Fill::default());
        m.insert(key.clone(), Slot::Filling(fill.clone()));
        Begin::Lead(FillGuard {
            zone: self.clone(),
            key: key.clone(),
            fill,
            store: false,
            done: false,
        })
    }
}

#[derive(Debug, Default)]
pub(crate) struct Fill {
    state: Mutex<FillState>,
    changed: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct FillState {
    meta: Option<Meta>,
    chunks: Vec<Bytes>,
    /// Some(true): complete; Some(false): failed.
    done: Option<bool>,
}

/// A piece of a fill's body.
pub(crate) enum Chunk {
    Mem(Bytes),
    End,
    Failed,
}

impl Fill {
    /// The response's head once it came (None: the fill failed first).
    pub(crate) async fn head(&self) -> Option<Meta> {
        loop {
            let n = self.changed.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            {
                let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(m) = &s.meta {
                    return Some(m.clone());
                }
                if s.done.is_some() {
                    return None;
                }
            }
            n.await;
        }
    }

    /// The `i`th piece of body, waiting for it.
    pub(crate) async fn read(&self, i: usize) -> Chunk {
        loop {
            let n = self.changed.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            {
                let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(c) = s.chunks.get(i) {
                    return Chunk::Mem(c.clone());
                }
                match s.done {
                    Some(true) => return Chunk::End,
                    Some(false) => return Chunk::Failed,
                    None => {}
                }
            }
            n.await;
        }
    }
}

pub(crate) struct FillGuard {
    zone: Arc<Zone>,
    key: Key,
    fill: Arc<Fill>,
    store: bool,
    done: bool,
}

impl FillGuard {
    pub(crate) fn fill(&self) -> Arc<Fill> {
        self.fill.clone()
    }

    pub(crate) fn set_head(&mut self, meta: Meta, store: bool) {
        self.store = store;
        self.fill
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .meta = Some(meta);
        self.fill.changed.notify_waiters();
    }

    pub(crate) fn append(&mut self, data: &[u8]) {
        self.fill
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .chunks
            .push(Bytes::copy_from_slice(data));
        self.fill.changed.notify_waiters();
    }

    pub(crate) fn finish(mut self, whole: bool) {
        self.end(whole);
    }

    fn end(&mut self, whole: bool) {
        if self.done {
            return;
        }
        self.done = true;
        let obj = {
            let mut s = self.fill.state.lock().unwrap_or_else(|e| e.into_inner());
            s.done = Some(whole);
            match (&s.meta, whole && self.store) {
                (Some(m), true) => {
                    let body: Vec<u8> = s.chunks.concat();
                    Some(Arc::new(Object {
                        meta: m.clone(),
                        body: Bytes::from(body),
                    }))
                }
                _ => None,
            }
        };
        let mut m = self.zone.map.lock().unwrap_or_else(|e| e.into_inner());
        match obj {
            Some(o) => {
                m.insert(self.key.clone(), Slot::Stored(o));
            }
            None => {
                if let Some(Slot::Filling(f)) = m.get(&self.key) {
                    if Arc::ptr_eq(f, &self.fill) {
                        m.remove(&self.key);
                    }
                }
            }
        }
        drop(m);
        self.fill.changed.notify_waiters();
    }
}

impl Drop for FillGuard {
    fn drop(&mut self) {
        self.end(false);
    }
}
