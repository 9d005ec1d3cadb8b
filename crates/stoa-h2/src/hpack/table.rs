//! The static table (RFC 7541 Appendix A) and the dynamic table (§2.3.2,
//! §4) of a decoder.

use std::collections::VecDeque;

/// RFC 7541 Appendix A: index 1 is `STATIC[0]`.
pub(super) static STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The first static index whose name is `name` (lowercase), for the
/// encoder's "indexed name" literals.
pub(super) fn static_name_index(name: &[u8]) -> Option<usize> {
    Some(match name {
        b":authority" => 1,
        b":method" => 2,
        b":path" => 4,
        b":scheme" => 6,
        b":status" => 8,
        b"accept-charset" => 15,
        b"accept-encoding" => 16,
        b"accept-language" => 17,
        b"accept-ranges" => 18,
        b"accept" => 19,
        b"access-control-allow-origin" => 20,
        b"age" => 21,
        b"allow" => 22,
        b"authorization" => 23,
        b"cache-control" => 24,
        b"content-disposition" => 25,
        b"content-encoding" => 26,
        b"content-language" => 27,
        b"content-length" => 28,
        b"content-location" => 29,
        b"content-range" => 30,
        b"content-type" => 31,
        b"cookie" => 32,
        b"date" => 33,
        b"etag" => 34,
        b"expect" => 35,
        b"expires" => 36,
        b"from" => 37,
        b"host" => 38,
        b"if-match" => 39,
        b"if-modified-since" => 40,
        b"if-none-match" => 41,
        b"if-range" => 42,
        b"if-unmodified-since" => 43,
        b"last-modified" => 44,
        b"link" => 45,
        b"location" => 46,
        b"max-forwards" => 47,
        b"proxy-authenticate" => 48,
        b"proxy-authorization" => 49,
        b"range" => 50,
        b"referer" => 51,
        b"refresh" => 52,
        b"retry-after" => 53,
        b"server" => 54,
        b"set-cookie" => 55,
        b"strict-transport-security" => 56,
        b"transfer-encoding" => 57,
        b"user-agent" => 58,
        b"vary" => 59,
        b"via" => 60,
        b"www-authenticate" => 61,
        _ => return None,
    })
}

/// RFC 7541 §4.1: an entry's size counts 32 bytes beyond its name and value.
pub(super) const ENTRY_OVERHEAD: usize = 32;

/// Where one entry's name and value lie in the ring (the value follows
/// the name, maybe wrapped to the ring's start).
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    pub(super) name_off: u32,
    pub(super) name_len: u32,
    pub(super) value_off: u32,
    pub(super) value_len: u32,
}

/// The dynamic table: entries' bytes in one ring buffer of `limit` bytes
/// (the names and values of a table of at most `limit` octets by §4.1
/// always fit, each entry counting 32 more than its bytes), and their
/// places in a ring of small records. An entry may wrap around the end
/// of the ring; the decoder copies such a field out when it reads it.
pub(super) struct Table {
    /// Allocated at the first insertion (idle connections of clients
    /// that never index cost nothing), then filled up to `limit` bytes
    /// (never zeroed) before the writes wrap to its start.
    ring: Vec<u8>,
    /// Where the next entry's bytes go.
    tail: usize,
    /// Newest first.
    entries: VecDeque<Entry>,
    /// Sum of entry sizes (§4.1).
    size: usize,
    /// The maximum the encoder chose (§6.3), at most `limit`.
    max_size: usize,
    /// Our SETTINGS_HEADER_TABLE_SIZE.
    limit: usize,
}

impl Table {
    pub(super) fn new(limit: usize) -> Table {
        // Offsets are u32; a table past 4 GiB is no setting anyone sends.
        let limit = limit.min(u32::MAX as usize);
        Table {
            ring: Vec::new(),
            tail: 0,
            entries: VecDeque::new(),
            size: 0,
            max_size: limit,
            limit,
        }
    }

    pub(super) fn limit(&self) -> usize {
        self.limit
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Entry `i` counting from the newest (0).
    pub(super) fn get(&self, i: usize) -> Option<Entry> {
        self.entries.get(i).copied()
    }

    /// The ring's bytes `off..off + len`, wrapping around its end: one
    /// slice, or two when the range wraps.
    pub(super) fn bytes(&self, off: u32, len: u32) -> (&[u8], &[u8]) {
        let (off, len) = (off as usize, len as usize);
        match self.ring.get(off..off + len) {
            Some(s) => (s, &[]),
            None => {
                let (a, b) = self.ring.split_at(off.min(self.ring.len()));
                (b, a.get(..len - b.len()).unwrap_or(&[]))
            }
        }
    }

    /// Entry `e`'s name and value as single slices: in place, or copied
    /// into `scratch` when either wraps around the ring's end.
    pub(super) fn entry<'a>(&'a self, e: Entry, scratch: &'a mut Vec<u8>) -> (&'a [u8], &'a [u8]) {
        let (n, v) = (e.name_off as usize, e.value_off as usize);
        let name = self.ring.get(n..n + e.name_len as usize);
        let value = self.ring.get(v..v + e.value_len as usize);
        if let (Some(name), Some(value)) = (name, value) {
            return (name, value);
        }
        let start = scratch.len();
        for (off, len) in [(e.name_off, e.name_len), (e.value_off, e.value_len)] {
            let (a, b) = self.bytes(off, len);
            scratch.extend_from_slice(a);
            scratch.extend_from_slice(b);
        }
        let (name, value) = scratch[start..].split_at(e.name_len as usize);
        (name, value)
    }

    /// A dynamic table size update (§6.3), already checked against the limit.
    pub(super) fn set_max_size(&mut self, max: usize) {
        self.max_size = max;
        self.evict_to(max);
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            let Some(e) = self.entries.pop_back() else {
                break;
            };
            self.size -= e.name_len as usize + e.value_len as usize + ENTRY_OVERHEAD;
        }
    }

    /// Adds an entry (§4.4): evicts the oldest ones to make room, or
    /// empties the table when the entry is larger than the maximum size.
    /// `name` must not borrow the ring (an evicted entry's bytes get
    /// overwritten).
    pub(super) fn insert(&mut self, name: &[u8], value: &[u8]) {
        let len = name.len() + value.len();
        let size = len + ENTRY_OVERHEAD;
        if size > self.max_size {
            self.entries.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max_size - size);
        if self.entries.capacity() == 0 {
            // A browser's first request enters 10 to 20 fields: grow once.
            self.entries.reserve(32.min(self.limit / ENTRY_OVERHEAD));
        }
        // The live bytes plus these are at most max_size - 32 per entry,
        // less than the ring: nothing live is overwritten.
        let name_off = self.tail as u32;
        self.write(name);
        let value_off = self.tail as u32;
        self.write(value);
        self.entries.push_front(Entry {
            name_off,
            name_len: name.len() as u32,
            value_off,
            value_len: value.len() as u32,
        });
        self.size += size;
    }

    /// Makes room for `n` more bytes before the ring reaches `limit`:
    /// 4 KiB at first (the default table), then doubling, never past
    /// `limit`, so a large SETTINGS_HEADER_TABLE_SIZE costs only what
    /// the peer fills.
    #[cold]
    fn grow(&mut self, n: usize) {
        let need = self.ring.len() + n;
        let cap = (self.ring.capacity() * 2)
            .max(4096)
            .max(need)
            .min(self.limit);
        self.ring.reserve_exact(cap - self.ring.len());
    }

    /// Copies `src` to the ring at `tail`: appended until the ring is
    /// `limit` bytes long, then over the oldest bytes, wrapping.
    fn write(&mut self, mut src: &[u8]) {
        while !src.is_empty() {
            let n = (self.limit - self.tail).min(src.len());
            let (now, rest) = src.split_at(n);
            if self.tail == self.ring.len() {
                if self.ring.len() + n > self.ring.capacity() {
                    self.grow(n);
                }
                self.ring.extend_from_slice(now);
            } else {
                // Filled once already: `tail + n <= limit == ring.len()`.
                self.ring[self.tail..self.tail + n].copy_from_slice(now);
            }
            src = rest;
            self.tail += n;
            if self.tail == self.limit {
                self.tail = 0;
            }
        }
    }

    /// Bytes held for the ring.
    #[cfg(test)]
    pub(super) fn ring_capacity(&self) -> usize {
        self.ring.capacity()
    }

    pub(super) fn size(&self) -> usize {
        self.size
    }
}
