//! QPACK (RFC 9204): field sections decoded against the static table and
//! a dynamic table the peer's encoder fills through its encoder stream,
//! bounded by the capacity we announce; and an encoder that uses the
//! static table and literals only (no state shared between sections, so
//! an encoded head can be cached and sent on any stream; RFC 9204 §2.1
//! leaves the use of the dynamic table to the encoder).
//!
//! Strings are Huffman-coded with HPACK's code (RFC 9204 §4.1.2), through
//! stoa-h2's table-driven coder; the encoder picks Huffman only when it
//! is shorter.

pub mod fuzzing;
mod table;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use stoa_h2::hpack::huffman;
pub use table::STATIC;

/// The size an entry counts for (RFC 9204 §3.2.1): name, value and 32.
pub const ENTRY_OVERHEAD: usize = 32;

/// Why QPACK input was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpackError {
    /// A field section that cannot be decoded: QPACK_DECOMPRESSION_FAILED
    /// (RFC 9204 §2.2), a connection error.
    Decompression(&'static str),
    /// Bad encoder-stream input: QPACK_ENCODER_STREAM_ERROR (§4.3).
    EncoderStream(&'static str),
    /// Bad decoder-stream input: QPACK_DECODER_STREAM_ERROR (§4.4).
    DecoderStream(&'static str),
    /// The decoded section is larger than the limit given (RFC 9114
    /// §4.2.2 sizes): the caller refuses the message, not the connection.
    TooLarge,
}

impl QpackError {
    /// As an HTTP/3 error.
    pub fn to_error(self) -> crate::Error {
        use crate::{Code, Error};
        match self {
            QpackError::Decompression(w) => Error::conn(Code::QpackDecompressionFailed, w),
            QpackError::EncoderStream(w) => Error::conn(Code::QpackEncoderStreamError, w),
            QpackError::DecoderStream(w) => Error::conn(Code::QpackDecoderStreamError, w),
            QpackError::TooLarge => Error::stream(Code::ExcessiveLoad, "field section too large"),
        }
    }
}

/// Decoded fields, kept in one buffer: names and values in order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fields {
    buf: Vec<u8>,
    /// (start in `buf`, name length, value length).
    spans: Vec<(u32, u32, u32)>,
    size: usize,
}

impl Fields {
    pub fn new() -> Fields {
        Fields::default()
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.spans.clear();
        self.size = 0;
    }

    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        let start = self.buf.len() as u32;
        self.buf.extend_from_slice(name);
        self.buf.extend_from_slice(value);
        self.spans
            .push((start, name.len() as u32, value.len() as u32));
        self.size += name.len() + value.len() + ENTRY_OVERHEAD;
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// RFC 9114 §4.2.2's size: names, values and 32 per field.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The `i`th field.
    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let &(s, n, v) = self.spans.get(i)?;
        let (s, n, v) = (s as usize, n as usize, v as usize);
        Some((&self.buf[s..s + n], &self.buf[s + n..s + n + v]))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        (0..self.spans.len()).filter_map(|i| self.get(i))
    }
}

/// Reads a prefixed integer (RFC 7541 §5.1, as RFC 9204 §4.1.1) at
/// `*pos`. None: the input ends first. Values past 2^62 are refused.
fn integer(buf: &[u8], pos: &mut usize, prefix: u32) -> Result<Option<u64>, &'static str> {
    let Some(&first) = buf.get(*pos) else {
        return Ok(None);
    };
    let max = (1u64 << prefix) - 1;
    let mut v = u64::from(first) & max;
    let mut p = *pos + 1;
    if v == max {
        let mut shift = 0u32;
        loop {
            let Some(&b) = buf.get(p) else {
                return Ok(None);
            };
            p += 1;
            if shift > 56 {
                return Err("an integer too large");
            }
            v += u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        if v > crate::varint::MAX {
            return Err("an integer too large");
        }
    }
    *pos = p;
    Ok(Some(v))
}

/// Reads a string literal whose length has a `prefix`-bit prefix and whose
/// Huffman flag is the bit just above it, into `out`. None: the input ends
/// first. Strings longer than `limit` are refused before they are read.
fn string(
    buf: &[u8],
    pos: &mut usize,
    prefix: u32,
    limit: u64,
    out: &mut Vec<u8>,
) -> Result<Option<()>, &'static str> {
    let Some(&first) = buf.get(*pos) else {
        return Ok(None);
    };
    let huff = first & (1 << prefix) != 0;
    let mut p = *pos;
    let Some(len) = integer(buf, &mut p, prefix)? else {
        return Ok(None);
    };
    if len > limit {
        return Err("a string longer than allowed");
    }
    let Some(bytes) = buf.get(p..p + len as usize) else {
        return Ok(None);
    };
    if huff {
        huffman::decode(bytes, out).map_err(|_| "bad Huffman data")?;
    } else {
        out.extend_from_slice(bytes);
    }
    *pos = p + len as usize;
    Ok(Some(()))
}

/// Appends an integer with a `prefix`-bit prefix, `flags` in the first
/// byte's other bits.
fn put_integer(out: &mut Vec<u8>, flags: u8, prefix: u32, value: u64) {
    let max = (1u64 << prefix) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends a string with a `prefix`-bit length, the Huffman flag just
/// above it, Huffman-coded when that is shorter.
fn put_string(out: &mut Vec<u8>, flags: u8, prefix: u32, s: &[u8]) {
    let hlen = huffman::encoded_len(s);
    if hlen < s.len() {
        put_integer(out, flags | (1 << prefix), prefix, hlen as u64);
        huffman::encode(s, out);
    } else {
        put_integer(out, flags, prefix, s.len() as u64);
        out.extend_from_slice(s);
    }
}

/// A dynamic table entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// Name then value.
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }
    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }
    fn size(&self) -> usize {
        self.bytes.len() + ENTRY_OVERHEAD
    }
}

/// Whether `decode` produced the fields or must wait for inserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    Done,
    /// The section needs entries not yet received (its Required Insert
    /// Count is above the table's insert count): decode it again once
    /// `feed_encoder` has brought them (`is_blocked` turns false).
    Blocked,
}

/// The decoding side of a connection's QPACK: the peer's dynamic table,
/// its blocked streams, and what we owe the peer on our decoder stream.
#[derive(Debug)]
pub struct Decoder {
    /// Our SETTINGS_QPACK_MAX_TABLE_CAPACITY.
    max_capacity: u64,
    /// Our SETTINGS_QPACK_BLOCKED_STREAMS.
    max_blocked: usize,
    capacity: usize,
    size: usize,
    entries: VecDeque<Entry>,
    /// Absolute index of `entries[0]` (entries evicted so far).
    evicted: u64,
    /// (stream, Required Insert Count) of the sections waiting.
    blocked: Vec<(u64, u64)>,
    /// The insert count the peer knows we received.
    acknowledged: u64,
    /// An encoder-stream instruction received in part.
    pending: Vec<u8>,
    /// Bytes for our decoder stream.
    out: Vec<u8>,
    scratch: Vec<u8>,
    value: Vec<u8>,
}

impl Decoder {
    /// `max_capacity` and `max_blocked`: what we announce in SETTINGS.
    pub fn new(max_capacity: u64, max_blocked: u64) -> Decoder {
        Decoder {
            max_capacity,
            max_blocked: max_blocked.min(u64::from(u32::MAX)) as usize,
            capacity: 0,
            size: 0,
            entries: VecDeque::new(),
            evicted: 0,
            blocked: Vec::new(),
            acknowledged: 0,
            pending: Vec::new(),
            out: Vec::new(),
            scratch: Vec::new(),
            value: Vec::new(),
        }
    }

    /// Entries inserted since the connection began.
    pub fn insert_count(&self) -> u64 {
        self.evicted + self.entries.len() as u64
    }

    /// The dynamic table's current size (sum of entry sizes).
    pub fn table_size(&self) -> usize {
        self.size
    }

    /// The capacity the peer's encoder set.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The dynamic table, newest entry last.
    pub fn entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.entries.iter().map(|e| (e.name(), e.value()))
    }

    /// Whether `stream`'s section still waits for inserts.
    pub fn is_blocked(&self, stream: u64) -> bool {
        self.blocked
            .iter()
            .any(|&(s, ric)| s == stream && ric > self.insert_count())
    }

    /// Streams whose sections waited and can be decoded now.
    pub fn unblocked(&self) -> impl Iterator<Item = u64> + '_ {
        let have = self.insert_count();
        self.blocked
            .iter()
            .filter(move |&&(_, ric)| ric <= have)
            .map(|&(s, _)| s)
    }

    /// How many streams wait.
    pub fn blocked_streams(&self) -> usize {
        self.blocked.len()
    }

    /// Bytes to send on our decoder stream (Section Acknowledgment, Stream
    /// Cancellation, Insert Count Increment), taken by the caller.
    pub fn output(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// `stream` was reset or abandoned before its field section was
    /// decoded: the peer's encoder may release what it referenced (Stream
    /// Cancellation, RFC 9204 §4.4.2; not needed with no dynamic table).
    pub fn cancel_stream(&mut self, stream: u64) {
        self.blocked.retain(|&(s, _)| s != stream);
        if self.max_capacity > 0 {
            put_integer(&mut self.out, 0x40, 6, stream);
        }
    }

    /// Reads encoder-stream bytes (RFC 9204 §4.3): instructions are
    /// applied as they complete, a partial one is kept for the next call.
    /// Afterwards an Insert Count Increment tells the peer what arrived
    /// (§4.4.3).
    pub fn feed_encoder(&mut self, bytes: &[u8]) -> Result<(), QpackError> {
        let mut buf = std::mem::take(&mut self.pending);
        buf.extend_from_slice(bytes);
        let mut pos = 0;
        let r = loop {
            if pos == buf.len() {
                break Ok(());
            }
            let mut p = pos;
            match self.instruction(&buf, &mut p) {
                Ok(true) => pos = p,
                Ok(false) => break Ok(()),
                Err(e) => break Err(QpackError::EncoderStream(e)),
            }
        };
        buf.drain(..pos);
        self.pending = buf;
        r?;
        let have = self.insert_count();
        if have > self.acknowledged {
            put_integer(&mut self.out, 0x00, 6, have - self.acknowledged);
            self.acknowledged = have;
        }
        Ok(())
    }

    /// One encoder instruction at `*pos`: Ok(false) if it is not all there.
    fn instruction(&mut self, buf: &[u8], pos: &mut usize) -> Result<bool, &'static str> {
        let first = buf[*pos];
        let limit = self.max_capacity;
        if first & 0x80 != 0 {
            // Insert With Name Reference: 1 T index(6), value.
            let Some(idx) = integer(buf, pos, 6)? else {
                return Ok(false);
            };
            self.value.clear();
            let mut value = std::mem::take(&mut self.value);
            let got = string(buf, pos, 7, limit, &mut value);
            let r = match got {
                Ok(Some(())) => {
                    let name: Vec<u8> = if first & 0x40 != 0 {
                        let (n, _) = STATIC
                            .get(idx as usize)
                            .ok_or("a static index past the table")?;
                        n.to_vec()
                    } else {
                        self.relative(idx)?.name().to_vec()
                    };
                    self.insert(&name, &value).map(|()| true)
                }
                Ok(None) => Ok(false),
                Err(e) => Err(e),
            };
            self.value = value;
            r
        } else if first & 0x40 != 0 {
            // Insert With Literal Name: 01 H len(5) name, value.
            let mut name = std::mem::take(&mut self.scratch);
            let mut value = std::mem::take(&mut self.value);
            name.clear();
            value.clear();
            let r = (|| {
                if string(buf, pos, 5, limit, &mut name)?.is_none() {
                    return Ok(false);
                }
                if string(buf, pos, 7, limit, &mut value)?.is_none() {
                    return Ok(false);
                }
                self.insert(&name, &value).map(|()| true)
            })();
            self.scratch = name;
            self.value = value;
            r
        } else if first & 0x20 != 0 {
            // Set Dynamic Table Capacity: 001 capacity(5).
            let Some(cap) = integer(buf, pos, 5)? else {
                return Ok(false);
            };
            if cap > self.max_capacity {
                return Err("a capacity above our maximum");
            }
            self.capacity = cap as usize;
            self.evict(self.capacity)?;
            Ok(true)
        } else {
            // Duplicate: 000 index(5).
            let Some(idx) = integer(buf, pos, 5)? else {
                return Ok(false);
            };
            let e = self.relative(idx)?.clone();
            self.insert(e.name(), e.value()).map(|()| true)
        }
    }

    /// The entry at a relative index of the encoder stream (§3.2.5: 0 is
    /// the newest).
    fn relative(&self, idx: u64) -> Result<&Entry, &'static str> {
        let count = self.entries.len() as u64;
        if idx >= count {
            return Err("a relative index past the table");
        }
        Ok(&self.entries[(count - 1 - idx) as usize])
    }

    /// Evicts entries, oldest first, until the table fits `room`.
    fn evict(&mut self, room: usize) -> Result<(), &'static str> {
        while self.size > room {
            let Some(e) = self.entries.pop_front() else {
                return Err("table accounting broke");
            };
            self.size -= e.size();
            self.evicted += 1;
        }
        Ok(())
    }

    fn insert(&mut self, name: &[u8], value: &[u8]) -> Result<(), &'static str> {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.capacity {
            return Err("an entry larger than the table's capacity");
        }
        self.evict(self.capacity - size)?;
        let mut bytes = Vec::with_capacity(name.len() + value.len());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        self.entries.push_back(Entry {
            bytes: bytes.into_boxed_slice(),
            name_len: name.len(),
        });
        self.size += size;
        Ok(())
    }

    /// The entry at absolute index `abs`, if it is still in the table.
    fn absolute(&self, abs: u64) -> Result<&Entry, QpackError> {
        abs.checked_sub(self.evicted)
            .and_then(|i| self.entries.get(i as usize))
            .ok_or(QpackError::Decompression("a reference to an evicted entry"))
    }

    /// Decodes the field section of `stream` (a HEADERS payload) into
    /// `fields` (cleared first), refusing it once it passes `max_size`
    /// (RFC 9114 §4.2.2 sizes). A section referencing entries not yet
    /// received is Blocked (up to our QPACK_BLOCKED_STREAMS streams; past
    /// that QPACK_DECOMPRESSION_FAILED, §2.1.2). A section with a Required
    /// Insert Count is acknowledged on the decoder stream (§4.4.1).
    pub fn decode(
        &mut self,
        stream: u64,
        section: &[u8],
        max_size: usize,
        fields: &mut Fields,
    ) -> Result<Decoded, QpackError> {
        fields.clear();
        let fail = QpackError::Decompression;
        let mut pos = 0;
        let encoded = integer(section, &mut pos, 8)
            .map_err(fail)?
            .ok_or(fail("a section prefix cut short"))?;
        let ric = self.required_insert_count(encoded)?;
        let sign = section.get(pos).ok_or(fail("a section prefix cut short"))? & 0x80 != 0;
        let delta = integer(section, &mut pos, 7)
            .map_err(fail)?
            .ok_or(fail("a section prefix cut short"))?;
        let base = if sign {
            ric.checked_sub(delta + 1).ok_or(fail("a negative base"))?
        } else {
            ric.checked_add(delta).ok_or(fail("a base too large"))?
        };
        if ric > self.insert_count() {
            if !self.blocked.iter().any(|&(s, _)| s == stream) {
                if self.blocked.len() >= self.max_blocked {
                    return Err(fail("more blocked streams than allowed"));
                }
                self.blocked.push((stream, ric));
            }
            return Ok(Decoded::Blocked);
        }
        self.blocked.retain(|&(s, _)| s != stream);
        let r = self.lines(section, pos, ric, base, max_size, fields);
        if ric > 0 && !matches!(r, Err(QpackError::Decompression(_))) {
            // Section Acknowledgment: 1 stream(7).
            put_integer(&mut self.out, 0x80, 7, stream);
            if ric > self.acknowledged {
                self.acknowledged = ric;
            }
        }
        r.map(|()| Decoded::Done)
    }

    /// §4.5.1.1.
    fn required_insert_count(&self, encoded: u64) -> Result<u64, QpackError> {
        if encoded == 0 {
            return Ok(0);
        }
        let fail = QpackError::Decompression;
        let max_entries = self.max_capacity / ENTRY_OVERHEAD as u64;
        let full_range = 2 * max_entries;
        if encoded > full_range {
            return Err(fail("an encoded Required Insert Count out of range"));
        }
        let max_value = self.insert_count() + max_entries;
        let max_wrapped = max_value / full_range * full_range;
        let mut ric = max_wrapped + encoded - 1;
        if ric > max_value {
            if ric <= full_range {
                return Err(fail("a Required Insert Count out of range"));
            }
            ric -= full_range;
        }
        if ric == 0 {
            return Err(fail("a Required Insert Count of zero encoded as nonzero"));
        }
        Ok(ric)
    }

    /// The field lines of a section (§4.5.2 to §4.5.6).
    fn lines(
        &mut self,
        section: &[u8],
        mut pos: usize,
        ric: u64,
        base: u64,
        max_size: usize,
        fields: &mut Fields,
    ) -> Result<(), QpackError> {
        let fail = QpackError::Decompression;
        let cut = || fail("a field line cut short");
        let limit = section.len() as u64 * 8;
        let mut max_ref: Option<u64> = None;
        while pos < section.len() {
            let first = section[pos];
            // Which entry the line names (static or absolute dynamic
            // index) and whether its value comes with it.
            let dynamic = |rel: u64, post: bool| -> Result<u64, QpackError> {
                let abs = if post {
                    base.checked_add(rel)
                } else {
                    base.checked_sub(rel + 1)
                }
                .ok_or(fail("a dynamic index below zero"))?;
                if abs >= ric {
                    return Err(fail("a reference past the Required Insert Count"));
                }
                Ok(abs)
            };
            if first & 0x80 != 0 {
                // Indexed Field Line: 1 T index(6).
                let idx = integer(section, &mut pos, 6)
                    .map_err(fail)?
                    .ok_or_else(cut)?;
                if first & 0x40 != 0 {
                    let (n, v) = STATIC
                        .get(idx as usize)
                        .ok_or(fail("a static index past the table"))?;
                    fields.push(n, v);
                } else {
                    let abs = dynamic(idx, false)?;
                    max_ref = max_ref.max(Some(abs));
                    let e = self.absolute(abs)?;
                    fields.push(e.name(), e.value());
                }
            } else if first & 0x40 != 0 {
                // Literal With Name Reference: 01 N T index(4), value.
                let idx = integer(section, &mut pos, 4)
                    .map_err(fail)?
                    .ok_or_else(cut)?;
                let mut value = std::mem::take(&mut self.value);
                value.clear();
                let got = string(section, &mut pos, 7, limit, &mut value);
                let r = match got {
                    Err(e) => Err(fail(e)),
                    Ok(None) => Err(cut()),
                    Ok(Some(())) if first & 0x10 != 0 => STATIC
                        .get(idx as usize)
                        .map(|(n, _)| fields.push(n, &value))
                        .ok_or(fail("a static index past the table")),
                    Ok(Some(())) => dynamic(idx, false).and_then(|abs| {
                        max_ref = max_ref.max(Some(abs));
                        let e = self.absolute(abs)?;
                        fields.push(e.name(), &value);
                        Ok(())
                    }),
                };
                self.value = value;
                r?;
            } else if first & 0x20 != 0 {
                // Literal With Literal Name: 001 N H len(3), name, value.
                let mut name = std::mem::take(&mut self.scratch);
                let mut value = std::mem::take(&mut self.value);
                name.clear();
                value.clear();
                let r = string(section, &mut pos, 3, limit, &mut name)
                    .and_then(|a| Ok(a.and(string(section, &mut pos, 7, limit, &mut value)?)));
                let r = match r {
                    Err(e) => Err(fail(e)),
                    Ok(None) => Err(cut()),
                    Ok(Some(())) => {
                        fields.push(&name, &value);
                        Ok(())
                    }
                };
                self.scratch = name;
                self.value = value;
                r?;
            } else if first & 0x10 != 0 {
                // Indexed Field Line With Post-Base Index: 0001 index(4).
                let idx = integer(section, &mut pos, 4)
                    .map_err(fail)?
                    .ok_or_else(cut)?;
                let abs = dynamic(idx, true)?;
                max_ref = max_ref.max(Some(abs));
                let e = self.absolute(abs)?;
                fields.push(e.name(), e.value());
            } else {
                // Literal With Post-Base Name Reference: 0000 N index(3).
                let idx = integer(section, &mut pos, 3)
                    .map_err(fail)?
                    .ok_or_else(cut)?;
                let abs = dynamic(idx, true)?;
                max_ref = max_ref.max(Some(abs));
                let mut value = std::mem::take(&mut self.value);
                value.clear();
                let r = match string(section, &mut pos, 7, limit, &mut value) {
                    Err(e) => Err(fail(e)),
                    Ok(None) => Err(cut()),
                    Ok(Some(())) => self.absolute(abs).map(|e| fields.push(e.name(), &value)),
                };
                self.value = value;
                r?;
            }
            if fields.size() > max_size {
                return Err(QpackError::TooLarge);
            }
        }
        // §2.2.3: a Required Insert Count above what the section uses.
        if ric > 0 && max_ref.map_or(0, |m| m + 1) != ric {
            return Err(fail("a Required Insert Count larger than needed"));
        }
        Ok(())
    }
}

/// Encodes field sections with the static table and literals only.
pub struct Encoder;

impl Encoder {
    /// The section prefix: Required Insert Count 0, Delta Base 0.
    pub fn prefix(out: &mut Vec<u8>) {
        out.extend_from_slice(&[0, 0]);
    }

    /// `:status`: indexed when the static table has it, else a literal
    /// with its name indexed (static entry 24).
    pub fn status(out: &mut Vec<u8>, status: u16) {
        let idx = match status {
            103 => 24,
            200 => 25,
            304 => 26,
            404 => 27,
            503 => 28,
            100 => 63,
            204 => 64,
            206 => 65,
            302 => 66,
            400 => 67,
            403 => 68,
            421 => 69,
            425 => 70,
            500 => 71,
            _ => 0,
        };
        if idx != 0 {
            put_integer(out, 0xc0, 6, idx);
            return;
        }
        put_integer(out, 0x50, 4, 24);
        let mut digits = [0u8; 5];
        let mut n = status;
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        put_string(out, 0, 7, &digits[i..]);
    }

    /// One field line: an indexed static entry when name and value match
    /// one, else a literal (its name indexed from the static table when
    /// there). `name` must be lowercase.
    pub fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        let runs = table::static_runs(name);
        if let Some(&i) = runs.iter().find(|&&i| STATIC[i].1 == value) {
            put_integer(out, 0xc0, 6, i as u64);
            return;
        }
        match runs.first() {
            Some(&i) => put_integer(out, 0x50, 4, i as u64),
            None => put_string(out, 0x20, 3, name),
        }
        put_string(out, 0, 7, value);
    }

    /// A request's pseudo-header fields (RFC 9114 §4.3.1), for a client.
    pub fn request(out: &mut Vec<u8>, method: &[u8], scheme: &[u8], authority: &[u8], path: &[u8]) {
        Encoder::field(out, b":method", method);
        Encoder::field(out, b":scheme", scheme);
        Encoder::field(out, b":authority", authority);
        Encoder::field(out, b":path", path);
    }
}

/// Reads the peer's decoder stream when our encoder never inserts: Stream
/// Cancellations are taken; a Section Acknowledgment or Insert Count
/// Increment refers to inserts we never made, QPACK_DECODER_STREAM_ERROR
/// (RFC 9204 §4.4.1, §4.4.3). Returns the bytes used (a partial
/// instruction is left).
pub fn read_decoder_stream(buf: &[u8]) -> Result<usize, QpackError> {
    let mut pos = 0;
    while let Some(&first) = buf.get(pos) {
        let mut p = pos;
        // Section Acknowledgment: 1 stream(7); the others: 01 / 00 (6).
        let prefix = if first & 0x80 != 0 { 7 } else { 6 };
        let Some(v) = integer(buf, &mut p, prefix).map_err(QpackError::DecoderStream)? else {
            break;
        };
        if first & 0x80 != 0 {
            return Err(QpackError::DecoderStream(
                "a Section Acknowledgment with no dynamic table in use",
            ));
        }
        if first & 0x40 == 0 && v == 0 {
            return Err(QpackError::DecoderStream("an Insert Count Increment of 0"));
        }
        if first & 0x40 == 0 {
            return Err(QpackError::DecoderStream(
                "an Insert Count Increment with no inserts",
            ));
        }
        pos = p;
    }
    Ok(pos)
}
