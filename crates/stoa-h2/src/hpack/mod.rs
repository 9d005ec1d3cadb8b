//! HPACK (RFC 7541): header block decoding with a bounded dynamic table,
//! and encoding of response heads.
//!
//! API fixed for the codec (`conn`) and the server; bodies to be written.

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
pub struct Decoder {}

impl Decoder {
    /// `max_table_size`: our SETTINGS_HEADER_TABLE_SIZE (4096 by default).
    pub fn new(max_table_size: usize) -> Decoder {
        let _ = max_table_size;
        todo!()
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
        let _ = (block, max_list_size, field);
        todo!()
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
        let _ = (out, status);
        todo!()
    }

    /// One field as "literal without indexing" (RFC 7541 §6.2.2), its
    /// name indexed from the static table when there, Huffman-coded when
    /// that is shorter. `name` must be lowercase.
    pub fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        let _ = (out, name, value);
        todo!()
    }

    /// A "dynamic table size update" to `size` (RFC 7541 §6.3): sent at
    /// the start of the first block after the peer lowers
    /// SETTINGS_HEADER_TABLE_SIZE below 4096, as this encoder never
    /// inserts.
    pub fn size_update(out: &mut Vec<u8>, size: usize) {
        let _ = (out, size);
        todo!()
    }
}
