//! HPACK (RFC 7541): header block decoding with a bounded dynamic table,
//! and encoding of response heads.
//!
//! The decoder makes one pass over a block without allocating (once its
//! scratch buffer and table have grown): a field whose bytes appear
//! literally in the block is handed out in place, Huffman-coded strings
//! are decoded into a scratch buffer reused for every field, and the
//! dynamic table is one ring of bytes. The encoder never indexes, so its
//! blocks can be cached and sent on any connection.

#[doc(hidden)]
pub mod fuzzing;
/// Also QPACK's (RFC 9204 §4.1.2 uses the same code): `stoa-h3` calls it.
pub mod huffman;
mod table;
#[cfg(test)]
mod tests;

use table::{Table, ENTRY_OVERHEAD, STATIC};

/// Why a header block could not be decoded: every one is a connection
/// error of type COMPRESSION_ERROR (RFC 9113 §4.3), except
/// `ListTooLarge`, which the caller answers per RFC 9113 §10.5.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// An integer or string ran past the end of the block.
    Truncated,
    /// An integer does not fit 32 bits.
    IntegerOverflow,
    /// An index of 0 or past the end of the tables.
    BadIndex,
    /// Huffman data with an EOS symbol, padding longer than 7 bits or not all ones.
    BadHuffman,
    /// A dynamic table size update above the limit we advertised, or one
    /// not at the start of a block (RFC 7541 §4.2).
    BadSizeUpdate,
    /// The decoded list exceeds the limit (RFC 7541 §4.1 sizes: name +
    /// value + 32 per field) given to `decode`.
    ListTooLarge,
}

/// Decodes header blocks of one connection (the peer's encoder state).
pub struct Decoder {
    table: Table,
    /// Huffman-decoded strings and table entries that wrap around the
    /// ring, for the field being decoded; reused across fields and blocks.
    scratch: Vec<u8>,
}

/// Where a string of the field being decoded lies until it is handed out.
#[derive(Clone, Copy, Debug)]
enum Str {
    Static(&'static [u8]),
    /// `block[start..end]`: a literal sent without Huffman coding.
    Block(usize, usize),
    /// `scratch[start..end]`.
    Scratch(usize, usize),
    /// Ring offset and length of a dynamic table name or value.
    Table(u32, u32),
}

impl Str {
    fn len(self) -> usize {
        match self {
            Str::Static(s) => s.len(),
            Str::Block(a, b) | Str::Scratch(a, b) => b - a,
            Str::Table(_, len) => len as usize,
        }
    }
}

impl Decoder {
    /// `max_table_size`: our SETTINGS_HEADER_TABLE_SIZE (4096 by default).
    pub fn new(max_table_size: usize) -> Decoder {
        Decoder {
            table: Table::new(max_table_size),
            scratch: Vec::new(),
        }
    }

    /// Decodes one complete header block (HEADERS + CONTINUATION payloads
    /// joined), calling `field(name, value)` for each field in order.
    /// Names are as sent (the caller checks they are lowercase); a
    /// field's bytes are only valid during the call. Stops with
    /// `ListTooLarge` once the sum of sizes passes `max_list_size`, after
    /// decoding the whole block (the table must stay in sync).
    pub fn decode(
        &mut self,
        block: &[u8],
        max_list_size: usize,
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), DecodeError> {
        let mut pos = 0;
        let mut list_size = 0usize;
        let mut too_large = false;
        // Size updates are allowed only before the first field (§4.2).
        let mut at_start = true;
        while let Some(&first) = block.get(pos) {
            self.scratch.clear();
            if first & 0x80 != 0 {
                // §6.1: indexed header field, most fields of a browser's
                // later requests: straight from the tables.
                let idx = integer(block, &mut pos, 7)?;
                at_start = false;
                let (name, value) = match STATIC.get(idx.wrapping_sub(1)) {
                    Some(&(name, value)) => (name, value),
                    None => {
                        let e = self
                            .table
                            .get(idx.wrapping_sub(STATIC.len() + 1))
                            .ok_or(DecodeError::BadIndex)?;
                        self.table.entry(e, &mut self.scratch)
                    }
                };
                list_size = list_size.saturating_add(name.len() + value.len() + ENTRY_OVERHEAD);
                too_large |= list_size > max_list_size;
                if !too_large {
                    field(name, value);
                }
                continue;
            }
            let (name, value, index) = if first & 0x40 != 0 {
                // §6.2.1: literal with incremental indexing.
                let idx = integer(block, &mut pos, 6)?;
                let name = self.name(block, &mut pos, idx)?;
                let value = string(block, &mut pos, &mut self.scratch)?;
                (name, value, true)
            } else if first & 0x20 != 0 {
                // §6.3: dynamic table size update.
                let size = integer(block, &mut pos, 5)?;
                if !at_start || size > self.table.limit() {
                    return Err(DecodeError::BadSizeUpdate);
                }
                self.table.set_max_size(size);
                continue;
            } else {
                // §6.2.2 without indexing (0000), §6.2.3 never indexed (0001).
                let idx = integer(block, &mut pos, 4)?;
                let name = self.name(block, &mut pos, idx)?;
                let value = string(block, &mut pos, &mut self.scratch)?;
                (name, value, false)
            };
            at_start = false;
            list_size = list_size.saturating_add(name.len() + value.len() + ENTRY_OVERHEAD);
            too_large |= list_size > max_list_size;
            if !too_large {
                let name = flatten(&self.table, &mut self.scratch, name);
                let value = flatten(&self.table, &mut self.scratch, value);
                field(
                    resolve(name, block, &self.scratch, &self.table),
                    resolve(value, block, &self.scratch, &self.table),
                );
            }
            if index {
                // The name may belong to an entry this insertion evicts
                // and overwrites (§4.4): copy it out first.
                let name = match name {
                    Str::Table(off, len) => copy_out(&self.table, &mut self.scratch, off, len),
                    other => other,
                };
                self.table.insert(
                    untabled(name, block, &self.scratch),
                    untabled(value, block, &self.scratch),
                );
            }
        }
        if too_large {
            Err(DecodeError::ListTooLarge)
        } else {
            Ok(())
        }
    }

    /// The name and value at `idx` of the index address space (§2.3.3),
    /// for a literal's indexed name.
    fn indexed(&self, idx: usize) -> Result<(Str, Str), DecodeError> {
        if idx == 0 {
            return Err(DecodeError::BadIndex);
        }
        if let Some(&(name, value)) = STATIC.get(idx - 1) {
            return Ok((Str::Static(name), Str::Static(value)));
        }
        let e = self
            .table
            .get(idx - 1 - STATIC.len())
            .ok_or(DecodeError::BadIndex)?;
        Ok((
            Str::Table(e.name_off, e.name_len),
            Str::Table(e.value_off, e.value_len),
        ))
    }

    /// A literal's name: indexed when `idx` is not 0, else the string
    /// that follows.
    fn name(&mut self, block: &[u8], pos: &mut usize, idx: usize) -> Result<Str, DecodeError> {
        if idx == 0 {
            string(block, pos, &mut self.scratch)
        } else {
            Ok(self.indexed(idx)?.0)
        }
    }

    /// Gives back the scratch buffer (Huffman-decoded strings of the last
    /// block): an idle connection needs only its table.
    pub fn shrink_idle(&mut self) {
        self.scratch = Vec::new();
    }

    /// The number of entries in the dynamic table.
    pub fn table_len(&self) -> usize {
        self.table.len()
    }
}

/// An integer with an N-bit prefix (§5.1) at `block[*pos]`, whose first
/// byte's high bits the caller has read.
fn integer(block: &[u8], pos: &mut usize, prefix: u32) -> Result<usize, DecodeError> {
    let mask = (1u8 << prefix) - 1;
    let Some(&first) = block.get(*pos) else {
        return Err(DecodeError::Truncated);
    };
    *pos += 1;
    let mut value = u64::from(first & mask);
    if value < u64::from(mask) {
        return Ok(value as usize);
    }
    let mut shift = 0;
    loop {
        let Some(&b) = block.get(*pos) else {
            return Err(DecodeError::Truncated);
        };
        *pos += 1;
        value += u64::from(b & 0x7f) << shift;
        if value > u64::from(u32::MAX) {
            return Err(DecodeError::IntegerOverflow);
        }
        if b & 0x80 == 0 {
            return Ok(value as usize);
        }
        shift += 7;
        // Five continuation bytes carry 35 bits: a sixth is past 32 bits
        // even when it only adds zeros.
        if shift > 28 {
            return Err(DecodeError::IntegerOverflow);
        }
    }
}

/// A string literal (§5.2) at `block[*pos]`: in place, or Huffman-decoded
/// into `scratch`.
fn string(block: &[u8], pos: &mut usize, scratch: &mut Vec<u8>) -> Result<Str, DecodeError> {
    let Some(&first) = block.get(*pos) else {
        return Err(DecodeError::Truncated);
    };
    let len = integer(block, pos, 7)?;
    let start = *pos;
    let end = start.saturating_add(len);
    let Some(bytes) = block.get(start..end) else {
        return Err(DecodeError::Truncated);
    };
    *pos = end;
    if first & 0x80 == 0 {
        return Ok(Str::Block(start, end));
    }
    let from = scratch.len();
    huffman::decode(bytes, scratch)?;
    Ok(Str::Scratch(from, scratch.len()))
}

/// A table string that wraps around the end of the ring, copied into
/// `scratch` so that it is one slice; any other string as it is.
fn flatten(table: &Table, scratch: &mut Vec<u8>, s: Str) -> Str {
    match s {
        Str::Table(off, len) if !table.bytes(off, len).1.is_empty() => {
            copy_out(table, scratch, off, len)
        }
        other => other,
    }
}

fn copy_out(table: &Table, scratch: &mut Vec<u8>, off: u32, len: u32) -> Str {
    let (a, b) = table.bytes(off, len);
    let from = scratch.len();
    scratch.extend_from_slice(a);
    scratch.extend_from_slice(b);
    Str::Scratch(from, scratch.len())
}

/// The bytes of a string; a table string must have been flattened.
fn resolve<'a>(s: Str, block: &'a [u8], scratch: &'a [u8], table: &'a Table) -> &'a [u8] {
    match s {
        Str::Static(s) => s,
        Str::Block(a, b) => &block[a..b],
        Str::Scratch(a, b) => &scratch[a..b],
        Str::Table(off, len) => {
            let (a, rest) = table.bytes(off, len);
            debug_assert!(rest.is_empty(), "a wrapping table string was not flattened");
            a
        }
    }
}

/// The bytes of a string that is not in the table (a literal's value, or
/// a name copied out of the table).
fn untabled<'a>(s: Str, block: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
    match s {
        Str::Static(s) => s,
        Str::Block(a, b) => &block[a..b],
        Str::Scratch(a, b) => &scratch[a..b],
        Str::Table(..) => {
            debug_assert!(false, "a table string was not copied out");
            &[]
        }
    }
}

/// Encodes response heads with no state shared between blocks (no
/// dynamic table insertions): a block encoded once can be sent again on
/// any stream of any connection, so a static file's head is encoded once
/// and reused.
pub struct Encoder;

impl Encoder {
    /// `:status` (indexed when the static table has it).
    pub fn status(out: &mut Vec<u8>, status: u16) {
        let idx = match status {
            200 => 8,
            204 => 9,
            206 => 10,
            304 => 11,
            400 => 12,
            404 => 13,
            500 => 14,
            _ => 0,
        };
        if idx != 0 {
            out.push(0x80 | idx);
            return;
        }
        // Literal without indexing, name `:status` (index 8).
        out.push(0x08);
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
        encode_string(out, &digits[i..]);
    }

    /// One field as "literal without indexing" (RFC 7541 §6.2.2), its
    /// name indexed from the static table when there, Huffman-coded when
    /// that is shorter. `name` must be lowercase.
    pub fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        match table::static_name_index(name) {
            Some(idx) => encode_integer(out, 0x00, 4, idx),
            None => {
                out.push(0x00);
                encode_string(out, name);
            }
        }
        encode_string(out, value);
    }

    /// A "dynamic table size update" to `size` (RFC 7541 §6.3): sent at
    /// the start of the first block after the peer lowers
    /// SETTINGS_HEADER_TABLE_SIZE below 4096, as this encoder never
    /// inserts.
    pub fn size_update(out: &mut Vec<u8>, size: usize) {
        encode_integer(out, 0x20, 5, size);
    }
}

/// §5.1: `value` with an N-bit prefix, the first byte's high bits `flags`.
fn encode_integer(out: &mut Vec<u8>, flags: u8, prefix: u32, value: usize) {
    let max = (1usize << prefix) - 1;
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

/// §5.2: a string literal, Huffman-coded when that is shorter.
fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
    let huffman_len = huffman::encoded_len(s);
    if huffman_len < s.len() {
        encode_integer(out, 0x80, 7, huffman_len);
        huffman::encode(s, out);
    } else {
        encode_integer(out, 0x00, 7, s.len());
        out.extend_from_slice(s);
    }
}
