//! Fills: one writer (`FillGuard`, the fetch's task on one worker
//! thread) and any number of readers (`Fill`, clients on any worker
//! thread) that follow the response as it grows. The body's first bytes
//! are kept in memory; past the fill's memory limit they go to a file
//! (the zone's disk copy being written, or an unlinked temporary file),
//! so readers at any pace never hold the writer, and a large response
//! never sits in memory.

use super::disk;
use super::{Body, DiskBody, Meta, Object, StoreKey, Zone};
use bytes::Bytes;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::Notify;

/// Body bytes a fill keeps in memory before it writes to a file (unless
/// the object is to be stored in a memory-only zone: then up to the
/// largest object that zone can keep).
pub(crate) const SPILL_AT: u64 = 1 << 20;

/// What `Zone::begin` answers.
pub(crate) enum Begin {
    /// The first request for the key: it fetches and fills.
    Lead(FillGuard),
    /// Another request fetches already: follow its fill.
    Wait(Arc<Fill>),
    /// The key is not collapsed for now: fetch alone, store nothing.
    Uncacheable,
}

/// A piece of a fill's body.
#[derive(Debug)]
pub(crate) enum Chunk {
    Mem(Bytes),
    /// `len` bytes of the file from `offset`.
    File(Arc<File>, u64, u64),
    /// The body is complete: nothing past this offset.
    End,
    /// The fill failed: nothing more will come.
    Failed,
}

/// A response being fetched, as its readers see it.
#[derive(Debug)]
pub(crate) struct Fill {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct State {
    meta: Option<Meta>,
    /// Body pieces from offset 0, contiguous: (offset, bytes).
    mem: Vec<(u64, Bytes)>,
    mem_len: u64,
    /// File segments, in order: body offset `from` is at file position
    /// `at`; a segment ends where the next begins (or at `len`).
    files: Vec<Segment>,
    /// Body bytes readable.
    len: u64,
    /// Some(true): complete; Some(false): failed.
    end: Option<bool>,
}

#[derive(Debug)]
struct Segment {
    from: u64,
    file: Arc<File>,
    at: u64,
}

impl Fill {
    pub(super) fn new() -> Fill {
        Fill {
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The response's head once it came; None when the fill failed first.
    pub(crate) async fn head(&self) -> Option<Meta> {
        loop {
            let n = self.changed.notified();
            tokio::pin!(n);
            // Registered before the look, so a change between the look
            // and the wait is not missed.
            n.as_mut().enable();
            {
                let s = self.state();
                if let Some(m) = &s.meta {
                    return Some(m.clone());
                }
                if s.end.is_some() {
                    return None;
                }
            }
            n.await;
        }
    }

    /// The body from `offset`, as much as is there (waiting for some).
    pub(crate) async fn read(&self, offset: u64) -> Chunk {
        loop {
            let n = self.changed.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if let Some(c) = self.try_read(offset) {
                return c;
            }
            n.await;
        }
    }

    /// The body from `offset` if there is something to say now.
    pub(crate) fn try_read(&self, offset: u64) -> Option<Chunk> {
        let s = self.state();
        if offset < s.mem_len {
            let i = s.mem.partition_point(|(from, _)| *from <= offset) - 1;
            let (from, b) = &s.mem[i];
            return Some(Chunk::Mem(b.slice((offset - from) as usize..)));
        }
        if offset < s.len {
            let i = s.files.partition_point(|g| g.from <= offset);
            if i > 0 {
                let g = &s.files[i - 1];
                let end = s.files.get(i).map_or(s.len, |n| n.from);
                return Some(Chunk::File(
                    g.file.clone(),
                    g.at + (offset - g.from),
                    end - offset,
                ));
            }
            // Unreachable by construction: the bytes past memory are in
            // a segment. Failing is better than a wrong body.
            return Some(Chunk::Failed);
        }
        match s.end {
            Some(true) => Some(Chunk::End),
            Some(false) => Some(Chunk::Failed),
            None => None,
        }
    }
}

/// The file a fill writes to.
struct Out {
    file: Arc<File>,
    /// Where the next byte goes.
    pos: u64,
    /// The disk copy's temporary name and its header, while the fill
    /// may still become a stored object on disk.
    copy: Option<Copy>,
}

struct Copy {
    tmp: PathBuf,
    header: disk::Header,
    body_at: u64,
}

/// The writer of a fill (see the module's documentation). Dropped
/// without `finish`, the fill has failed.
pub(crate) struct FillGuard {
    zone: Arc<Zone>,
    key: StoreKey,
    fill: Arc<Fill>,
    store: bool,
    /// Body bytes kept in memory at most.
    mem_limit: u64,
    /// All bytes so far are in memory.
    mem_open: bool,
    out: Option<Out>,
    len: u64,
    done: bool,
}

impl FillGuard {
    pub(super) fn new(zone: Arc<Zone>, key: StoreKey, fill: Arc<Fill>) -> FillGuard {
        FillGuard {
            zone,
            key,
            fill,
            store: false,
            mem_limit: SPILL_AT,
            mem_open: true,
            out: None,
            len: 0,
            done: false,
        }
    }

    /// The fill its readers follow.
    pub(crate) fn fill(&self) -> Arc<Fill> {
        self.fill.clone()
    }

    /// The key being filled.
    pub(crate) fn key(&self) -> &StoreKey {
        &self.key
    }

    /// The response's head: readers may start. `store`: it may become a
    /// stored object (false: delivered to the readers, then dropped).
    /// Called once, before any `append`.
    pub(crate) fn set_head(&mut self, meta: Meta, store: bool) {
        let b = self.zone.bounds();
        self.store = store && meta.len.is_none_or(|l| l <= b.max_object);
        if self.store {
            if let (Some(dir), Some(zd)) = (self.zone.dir(), self.zone.disk.as_ref()) {
                let header = disk::Header::new(&self.key, &meta);
                match disk::create_copy(self.zone.as_ref(), dir, zd, &header) {
                    Ok((file, tmp, body_at)) => {
                        let file = Arc::new(file);
                        self.fill.state().files.push(Segment {
                            from: 0,
                            file: file.clone(),
                            at: body_at,
                        });
                        self.out = Some(Out {
                            file,
                            pos: body_at,
                            copy: Some(Copy {
                                tmp,
                                header,
                                body_at,
                            }),
                        });
                    }
                    Err(e) => {
                        self.zone.count_store_failure();
                        tracing::warn!(zone = %self.zone.name, "cache: disk copy: {e}");
                    }
                }
            }
            if self.out.is_none() {
                // Memory only: the object is kept whole in memory, if it
                // fits the zone at all.
                self.mem_limit = b.max_object.min(b.memory);
            }
        }
        self.fill.state().meta = Some(meta);
        self.fill.changed.notify_waiters();
    }

    /// More body. An error: the bytes could be held nowhere; the fill has
    /// failed (readers see `Failed` past what they had).
    pub(crate) fn append(&mut self, data: &[u8]) -> io::Result<()> {
        if self.done {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if data.is_empty() {
            return Ok(());
        }
        let n = data.len() as u64;
        let new_len = self.len + n;
        if self.store && new_len > self.zone.bounds().max_object {
            self.stop_storing();
        }
        let mut mem = None;
        if self.mem_open && new_len <= self.mem_limit {
            mem = Some(Bytes::copy_from_slice(data));
        } else if self.mem_open {
            self.mem_open = false;
            if self.store && self.out.is_none() {
                // A memory-only zone cannot keep it whole.
                self.stop_storing();
            }
        }
        let mut segment = None;
        if self.out.is_some() || !self.mem_open {
            if let Err(e) = self.write(data) {
                if let Some(out) = self.out.take() {
                    self.abandon_copy(out.copy, &e);
                }
                if mem.is_none() {
                    // The rest goes to a new temporary file.
                    match self.spill() {
                        Ok(out) => {
                            segment = Some(Segment {
                                from: self.len,
                                file: out.file.clone(),
                                at: 0,
                            });
                            self.out = Some(out);
                            if let Err(e) = self.write(data) {
                                return Err(self.fail(e));
                            }
                        }
                        Err(e) => return Err(self.fail(e)),
                    }
                }
            }
        }
        {
            let mut s = self.fill.state();
            if let Some(m) = mem {
                let at = s.mem_len;
                s.mem.push((at, m));
                s.mem_len += n;
            }
            if let Some(g) = segment {
                s.files.push(g);
            }
            s.len = new_len;
        }
        self.len = new_len;
        self.fill.changed.notify_waiters();
        Ok(())
    }

    /// Writes `data` at the end of the file, opening a temporary one
    /// first if there is none (then its segment is registered).
    fn write(&mut self, data: &[u8]) -> io::Result<()> {
        if self.out.is_none() {
            let out = self.spill()?;
            self.fill.state().files.push(Segment {
                from: self.len,
                file: out.file.clone(),
                at: 0,
            });
            self.out = Some(out);
        }
        let Some(out) = self.out.as_mut() else {
            return Err(io::ErrorKind::NotFound.into());
        };
        #[cfg(test)]
        if out.copy.is_some() {
            self.zone.take_write_budget(data.len() as u64)?;
        }
        out.file.write_all_at(data, out.pos)?;
        out.pos += data.len() as u64;
        Ok(())
    }

    /// An unlinked temporary file (in the zone's directory if it has one:
    /// the same disk the zone was given room on).
    fn spill(&self) -> io::Result<Out> {
        let file = disk::unlinked_temp(self.zone.dir())?;
        Ok(Out {
            file: Arc::new(file),
            pos: 0,
            copy: None,
        })
    }

    /// The response will not be stored: no disk copy (the file it was
    /// written to stays, unnamed, for the readers).
    fn stop_storing(&mut self) {
        self.store = false;
        if let Some(c) = self.out.as_mut().and_then(|o| o.copy.take()) {
            let _ = std::fs::remove_file(&c.tmp);
        }
    }

    /// A write to the disk copy failed (ENOSPC, EIO): it is given up, one
    /// log line; the fill goes on from memory or another file.
    fn abandon_copy(&mut self, copy: Option<Copy>, e: &io::Error) {
        if let Some(c) = copy {
            let _ = std::fs::remove_file(&c.tmp);
            self.zone.count_store_failure();
            tracing::warn!(zone = %self.zone.name, "cache: disk copy abandoned: {e}");
            // Without a disk copy, the object is kept only if all of it
            // is in memory (and stays so).
            let b = self.zone.bounds();
            if !self.mem_open || self.len > b.memory.min(b.max_object) {
                self.store = false;
            } else {
                self.mem_limit = b.max_object.min(b.memory);
            }
        }
    }

    /// The bytes could not be held: the fill fails now.
    fn fail(&mut self, e: io::Error) -> io::Error {
        tracing::warn!(zone = %self.zone.name, "cache: fill failed: {e}");
        self.end(false);
        e
    }

    /// The response is complete: it becomes a stored object if it may
    /// (whether it did), and the readers see its end.
    pub(crate) fn finish(mut self) -> bool {
        self.end(true)
    }

    /// Ends the fill with an object already stored (a 304 revalidated
    /// it: `Zone::update_meta`): the readers get that object's head and
    /// body; nothing new is stored.
    pub(crate) fn finish_with(mut self, obj: &Arc<Object>) {
        if self.done {
            return;
        }
        self.done = true;
        let seg = match &obj.body {
            Body::Mem(_) => None,
            Body::Disk(_) => match obj.file() {
                Ok((file, at, _)) => Some(Segment { from: 0, file, at }),
                Err(e) => {
                    tracing::warn!(zone = %self.zone.name, "cache: {e}");
                    self.release(None);
                    self.mark_end(false);
                    return;
                }
            },
        };
        {
            let mut s = self.fill.state();
            s.meta = Some(obj.meta.clone());
            s.mem.clear();
            s.files.clear();
            s.mem_len = 0;
            if let Body::Mem(b) = &obj.body {
                s.mem_len = b.len() as u64;
                s.mem.push((0, b.clone()));
            }
            s.files.extend(seg);
            s.len = obj.len();
        }
        if let Some(out) = self.out.take() {
            if let Some(c) = out.copy {
                let _ = std::fs::remove_file(c.tmp);
            }
        }
        self.release(None);
        self.mark_end(true);
    }

    fn end(&mut self, complete: bool) -> bool {
        if self.done {
            return false;
        }
        self.done = true;
        let out = self.out.take();
        let meta = self.fill.state().meta.clone();
        let obj = match (complete && self.store, meta) {
            (true, Some(meta)) => self.object(meta, out),
            (_, _) => {
                if let Some(c) = out.and_then(|o| o.copy) {
                    let _ = std::fs::remove_file(c.tmp);
                }
                None
            }
        };
        let wanted = obj.is_some();
        let stored = self.release(obj);
        if wanted && !stored {
            // The bounds had no room for it.
            self.zone.count_store_failure();
        }
        self.mark_end(complete);
        stored
    }

    /// The stored object a complete fill makes: its disk copy put in
    /// place, its body in memory when all of it is.
    fn object(&mut self, mut meta: Meta, out: Option<Out>) -> Option<Arc<Object>> {
        meta.len = Some(self.len);
        let mut disk = None;
        if let Some(Out {
            file,
            copy: Some(c),
            ..
        }) = out
        {
            match disk::complete(
                self.zone.as_ref(),
                &file,
                c.header,
                c.body_at,
                self.len,
                &c.tmp,
            ) {
                Ok((path, size)) => {
                    disk = Some(Arc::new(DiskBody {
                        path,
                        at: c.body_at,
                        len: self.len,
                        size,
                        open: Mutex::new(Arc::downgrade(&file)),
                    }));
                    // The object holds no descriptor of its own: the
                    // readers keep it open while they read.
                    drop(file);
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&c.tmp);
                    self.zone.count_store_failure();
                    tracing::warn!(zone = %self.zone.name, "cache: disk copy: {e}");
                }
            }
        }
        let body = if self.mem_open {
            let s = self.fill.state();
            let mut whole = Vec::with_capacity(self.len as usize);
            for (_, b) in &s.mem {
                whole.extend_from_slice(b);
            }
            Body::Mem(Bytes::from(whole))
        } else {
            Body::Disk(disk.clone()?)
        };
        Some(Arc::new(Object {
            meta,
            body,
            key: self.key.clone(),
            id: self.zone.next_id(),
            disk,
            derived: OnceLock::new(),
        }))
    }

    /// The fill is no longer the key's; `obj` stored. Whether it was.
    fn release(&self, obj: Option<Arc<Object>>) -> bool {
        self.zone.end_fill(&self.key, &self.fill, obj)
    }

    fn mark_end(&self, complete: bool) {
        self.fill.state().end = Some(complete);
        self.fill.changed.notify_waiters();
    }
}

impl Drop for FillGuard {
    fn drop(&mut self) {
        self.end(false);
    }
}
