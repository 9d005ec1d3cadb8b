//! Body framing: the content-length and chunked decoders (RFC 9112 §6.2,
//! §7.1) and the chunked encoder.

use crate::Framing;

/// Longest chunk-size line (size, extensions) accepted; longer lines are an
/// attack on memory, not a real client (compare CVE-2015-3183's family).
const MAX_CHUNK_LINE: usize = 4096;
/// Longest trailer section accepted.
const MAX_TRAILERS: usize = 16 * 1024;
/// Largest chunk size accepted: what a signed 64-bit length holds (off_t,
/// as nginx checks; an application reading CONTENT_LENGTH into an i64
/// would see a larger one as negative). Anything above is an attack on
/// someone's arithmetic, refused at its last digit.
const MAX_CHUNK_SIZE: u64 = i64::MAX as u64;

/// Why a body could not be decoded. The connection cannot be reused after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyError {
    /// A chunk size that is not hex, overflows, or a missing CRLF.
    BadChunk,
    /// A chunk line or trailer section past its limit.
    TooLong,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading hex digits of the size.
    Size {
        size: u64,
        digits: u8,
    },
    /// Past the size: extensions or whitespace until CRLF.
    Ext {
        size: u64,
        len: usize,
    },
    /// Expecting the LF after a CR in the size line.
    SizeLf {
        size: u64,
    },
    Data {
        remaining: u64,
    },
    DataCr,
    DataLf,
    /// In the trailer section; `line` counts bytes of the current line.
    Trailer {
        line: usize,
        total: usize,
        cr: bool,
    },
    Done,
}

/// Decodes a message body incrementally from whatever bytes arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyDecoder {
    Length {
        remaining: u64,
    },
    Chunked(ChunkedState),
    /// Close-delimited (responses only): everything until EOF.
    Eof {
        done: bool,
    },
}

/// Opaque state of the chunked decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkedState(Chunk);

impl BodyDecoder {
    pub fn new(framing: Framing) -> BodyDecoder {
        match framing {
            Framing::None => BodyDecoder::Length { remaining: 0 },
            Framing::Length(n) => BodyDecoder::Length { remaining: n },
            Framing::Chunked => {
                BodyDecoder::Chunked(ChunkedState(Chunk::Size { size: 0, digits: 0 }))
            }
            Framing::Close => BodyDecoder::Eof { done: false },
        }
    }

    /// True once the whole body has been seen.
    pub fn is_done(&self) -> bool {
        match self {
            BodyDecoder::Length { remaining } => *remaining == 0,
            BodyDecoder::Chunked(ChunkedState(c)) => *c == Chunk::Done,
            BodyDecoder::Eof { done } => *done,
        }
    }

    /// Body bytes announced and not yet decoded: the rest of a
    /// Content-Length body, or of the chunk being read (known from its size
    /// line on, so a size limit can refuse a chunk before its data comes).
    pub fn announced(&self) -> u64 {
        match self {
            BodyDecoder::Length { remaining } => *remaining,
            BodyDecoder::Chunked(ChunkedState(c)) => match *c {
                Chunk::Ext { size, .. } | Chunk::SizeLf { size } => size,
                Chunk::Data { remaining } => remaining,
                _ => 0,
            },
            BodyDecoder::Eof { .. } => 0,
        }
    }

    /// Marks a close-delimited body complete (the peer closed). Returns
    /// whether the body was in fact complete at EOF.
    pub fn eof(&mut self) -> bool {
        match self {
            BodyDecoder::Eof { done } => {
                *done = true;
                true
            }
            _ => self.is_done(),
        }
    }

    /// Consumes framing and data from the start of `input`. Returns how many
    /// bytes were consumed and the body data found among them (a sub-slice of
    /// `input`, possibly empty). Call again with the rest until it consumes
    /// nothing; then more input is needed, or [`is_done`](Self::is_done).
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<(usize, &'a [u8]), BodyError> {
        match self {
            BodyDecoder::Length { remaining } => {
                let n = (*remaining).min(input.len() as u64) as usize;
                *remaining -= n as u64;
                Ok((n, &input[..n]))
            }
            BodyDecoder::Eof { done } => {
                if *done {
                    Ok((0, &input[..0]))
                } else {
                    Ok((input.len(), input))
                }
            }
            BodyDecoder::Chunked(ChunkedState(state)) => decode_chunked(state, input),
        }
    }
}

fn decode_chunked<'a>(state: &mut Chunk, input: &'a [u8]) -> Result<(usize, &'a [u8]), BodyError> {
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        match *state {
            Chunk::Size { size, digits } => {
                if let Some(d) = hex(b) {
                    // Past MAX_CHUNK_SIZE with this digit, whatever it is
                    // (so no overflow either); more than 16 digits is
                    // refused even with leading zeros.
                    if digits >= 16 || size > MAX_CHUNK_SIZE >> 4 {
                        return Err(BodyError::BadChunk);
                    }
                    *state = Chunk::Size {
                        size: size << 4 | u64::from(d),
                        digits: digits + 1,
                    };
                } else if digits == 0 {
                    return Err(BodyError::BadChunk);
                } else if b == b'\r' {
                    *state = Chunk::SizeLf { size };
                } else if b == b';' || b == b' ' || b == b'\t' {
                    *state = Chunk::Ext { size, len: 0 };
                } else {
                    return Err(BodyError::BadChunk);
                }
                i += 1;
            }
            Chunk::Ext { size, len } => {
                if b == b'\r' {
                    *state = Chunk::SizeLf { size };
                } else if b == b'\n' || b == 0 {
                    // A bare LF is a framing ambiguity other parsers resolve
                    // differently: refuse it (chunk extension smuggling).
                    return Err(BodyError::BadChunk);
                } else if len >= MAX_CHUNK_LINE {
                    return Err(BodyError::TooLong);
                } else {
                    *state = Chunk::Ext { size, len: len + 1 };
                }
                i += 1;
            }
            Chunk::SizeLf { size } => {
                if b != b'\n' {
                    return Err(BodyError::BadChunk);
                }
                i += 1;
                *state = if size == 0 {
                    Chunk::Trailer {
                        line: 0,
                        total: 0,
                        cr: false,
                    }
                } else {
                    Chunk::Data { remaining: size }
                };
            }
            Chunk::Data { remaining } => {
                // Framing consumed so far and the data after it go out
                // together: the data is still one contiguous slice.
                let n = remaining.min((input.len() - i) as u64) as usize;
                let left = remaining - n as u64;
                *state = if left == 0 {
                    Chunk::DataCr
                } else {
                    Chunk::Data { remaining: left }
                };
                return Ok((i + n, &input[i..i + n]));
            }
            Chunk::DataCr => {
                if b != b'\r' {
                    return Err(BodyError::BadChunk);
                }
                *state = Chunk::DataLf;
                i += 1;
            }
            Chunk::DataLf => {
                if b != b'\n' {
                    return Err(BodyError::BadChunk);
                }
                *state = Chunk::Size { size: 0, digits: 0 };
                i += 1;
            }
            Chunk::Trailer { line, total, cr } => {
                if total >= MAX_TRAILERS {
                    return Err(BodyError::TooLong);
                }
                i += 1;
                if cr {
                    if b != b'\n' {
                        return Err(BodyError::BadChunk);
                    }
                    if line == 0 {
                        *state = Chunk::Done;
                        return Ok((i, &input[..0]));
                    }
                    *state = Chunk::Trailer {
                        line: 0,
                        total: total + 1,
                        cr: false,
                    };
                } else if b == b'\r' {
                    *state = Chunk::Trailer {
                        line,
                        total: total + 1,
                        cr: true,
                    };
                } else if b == b'\n' {
                    return Err(BodyError::BadChunk);
                } else {
                    *state = Chunk::Trailer {
                        line: line + 1,
                        total: total + 1,
                        cr: false,
                    };
                }
            }
            Chunk::Done => return Ok((i, &input[..0])),
        }
    }
    Ok((i, &input[..0]))
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Appends the size line of a chunk of `len` bytes (`len` must not be 0:
/// that is the last chunk, see [`LAST_CHUNK`]).
pub fn push_chunk_header(buf: &mut Vec<u8>, len: usize) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut tmp = [0u8; 16];
    let mut i = tmp.len();
    let mut n = len;
    loop {
        i -= 1;
        tmp[i] = DIGITS[n & 15];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
    buf.extend_from_slice(b"\r\n");
}

/// The CRLF that ends every chunk's data.
pub const CHUNK_END: &[u8] = b"\r\n";
/// The last chunk with an empty trailer section.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `step` bytes (keeping unconsumed bytes,
    /// as a connection buffer would) and collects the decoded body.
    fn decode_all(
        framing: Framing,
        input: &[u8],
        step: usize,
    ) -> Result<(Vec<u8>, usize), BodyError> {
        let mut d = BodyDecoder::new(framing);
        let mut out = Vec::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut consumed_total = 0;
        for piece in input.chunks(step) {
            buf.extend_from_slice(piece);
            while !d.is_done() {
                let (n, data) = d.decode(&buf)?;
                out.extend_from_slice(data);
                buf.drain(..n);
                consumed_total += n;
                if n == 0 {
                    break;
                }
            }
            if d.is_done() {
                break;
            }
        }
        Ok((out, consumed_total))
    }

    #[test]
    fn content_length_body_stops_at_the_length() {
        let (body, n) = decode_all(Framing::Length(5), b"helloGET /", 3).unwrap();
        assert_eq!(body, b"hello");
        assert_eq!(n, 5);
    }

    #[test]
    fn chunked_body_is_decoded_at_every_split_rfc9112_7_1() {
        let wire =
            b"5\r\nhello\r\n6;ext=1\r\n world\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\nNEXT";
        for step in 1..wire.len() {
            let (body, n) = decode_all(Framing::Chunked, wire, step).unwrap();
            assert_eq!(body, b"hello world0123456789", "step {step}");
            assert_eq!(n, wire.len() - 4, "step {step}");
        }
    }

    #[test]
    fn empty_chunked_body_is_just_the_last_chunk() {
        let (body, n) = decode_all(Framing::Chunked, b"0\r\n\r\n", 1).unwrap();
        assert!(body.is_empty());
        assert_eq!(n, 5);
    }

    #[test]
    fn chunk_sizes_that_overflow_or_are_not_hex_are_refused() {
        assert_eq!(
            decode_all(Framing::Chunked, b"10000000000000000\r\n", 64).unwrap_err(),
            BodyError::BadChunk
        );
        assert_eq!(
            decode_all(Framing::Chunked, b"g\r\n", 64).unwrap_err(),
            BodyError::BadChunk
        );
        assert_eq!(
            decode_all(Framing::Chunked, b"-1\r\n", 64).unwrap_err(),
            BodyError::BadChunk
        );
        assert_eq!(
            decode_all(Framing::Chunked, b"\r\n", 64).unwrap_err(),
            BodyError::BadChunk
        );
    }

    #[test]
    fn an_absurd_chunk_size_is_refused_at_its_last_digit_rfc9112_7_1() {
        for wire in [
            &b"ffffffffffffffff"[..],
            b"8000000000000000",
            b"FFFFFFFFFFFFFFFF",
            b"00000000000000001",
            b"10000000000000000",
        ] {
            // Refused as soon as the digits are in, before any CRLF or data.
            let mut d = BodyDecoder::new(Framing::Chunked);
            assert_eq!(
                d.decode(wire),
                Err(BodyError::BadChunk),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
            assert_eq!(
                decode_all(Framing::Chunked, wire, 1).unwrap_err(),
                BodyError::BadChunk
            );
        }
        // The largest accepted size waits for its data.
        let mut d = BodyDecoder::new(Framing::Chunked);
        assert_eq!(d.decode(b"7fffffffffffffff\r\nab"), Ok((20, &b"ab"[..])));
        assert!(!d.is_done());
        assert_eq!(d.announced(), i64::MAX as u64 - 2);
    }

    #[test]
    fn a_chunk_is_announced_from_its_size_line_on() {
        let mut d = BodyDecoder::new(Framing::Chunked);
        assert_eq!(d.decode(b"1"), Ok((1, &b""[..])));
        assert_eq!(d.announced(), 0, "more digits may follow");
        assert_eq!(d.decode(b"0;x"), Ok((3, &b""[..])));
        assert_eq!(d.announced(), 16);
        assert_eq!(d.decode(b"\r\nabc"), Ok((5, &b"abc"[..])));
        assert_eq!(d.announced(), 13);
        let d = BodyDecoder::new(Framing::Length(7));
        assert_eq!(d.announced(), 7);
    }

    #[test]
    fn bare_lf_in_chunk_framing_is_refused_against_smuggling() {
        assert_eq!(
            decode_all(Framing::Chunked, b"5\nhello\r\n0\r\n\r\n", 64).unwrap_err(),
            BodyError::BadChunk
        );
        assert_eq!(
            decode_all(Framing::Chunked, b"5\r\nhello\n0\r\n\r\n", 64).unwrap_err(),
            BodyError::BadChunk
        );
        assert_eq!(
            decode_all(Framing::Chunked, b"5;a\nb\r\nhello\r\n", 64).unwrap_err(),
            BodyError::BadChunk
        );
    }

    #[test]
    fn missing_crlf_after_chunk_data_is_refused() {
        assert_eq!(
            decode_all(Framing::Chunked, b"3\r\nhelloX\r\n", 64).unwrap_err(),
            BodyError::BadChunk
        );
    }

    #[test]
    fn an_endless_chunk_extension_is_cut_off() {
        let mut wire = b"5;".to_vec();
        wire.extend(std::iter::repeat_n(b'a', MAX_CHUNK_LINE + 10));
        assert_eq!(
            decode_all(Framing::Chunked, &wire, 100).unwrap_err(),
            BodyError::TooLong
        );
    }

    #[test]
    fn chunk_header_encoding_is_lowercase_hex() {
        let mut b = Vec::new();
        push_chunk_header(&mut b, 1);
        push_chunk_header(&mut b, 255);
        push_chunk_header(&mut b, 4096);
        assert_eq!(b, b"1\r\nff\r\n1000\r\n");
    }

    #[test]
    fn close_delimited_body_takes_everything_until_eof() {
        let mut d = BodyDecoder::new(Framing::Close);
        let (n, data) = d.decode(b"abc").unwrap();
        assert_eq!((n, data), (3, &b"abc"[..]));
        assert!(!d.is_done());
        assert!(d.eof());
        assert!(d.is_done());
    }
}
