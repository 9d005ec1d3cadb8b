//! One response's encoder: made at the first byte of body (a static
//! file's kept variant needs none), fed piece by piece, flushed at the
//! application's flushes so that a stream (server-sent events, a
//! progress page) arrives as it is written.

use super::cache::{self, Key};
use super::Coding;
use crate::filter::{BodyFilter, FileVersion, Whole};
use bytes::Bytes;
use std::io::Write;
use std::os::unix::fs::FileExt;

/// brotli's window: 2^20 bytes (nginx's brotli module uses 512 KiB;
/// the encoder's memory grows with it, times every streaming response).
const BROTLI_LGWIN: u32 = 20;

/// The largest file whose compressed form is kept: a larger one is
/// streamed through an encoder like any body.
const MAX_KEPT_FILE: u64 = 8 << 20;

enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Br(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl Encoder {
    fn new(coding: Coding, level: i32, hint: Option<u64>) -> std::io::Result<Encoder> {
        Ok(match coding {
            Coding::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(level.clamp(1, 9) as u32),
            )),
            Coding::Br => {
                let params = brotli::enc::BrotliEncoderParams {
                    quality: level,
                    lgwin: BROTLI_LGWIN as i32,
                    size_hint: hint.map_or(0, |n| n.min(usize::MAX as u64) as usize),
                    ..Default::default()
                };
                Encoder::Br(Box::new(brotli::CompressorWriter::with_params(
                    Vec::new(),
                    4096,
                    &params,
                )))
            }
            Coding::Zstd => Encoder::Zstd(zstd::stream::write::Encoder::new(Vec::new(), level)?),
        })
    }

    fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        match self {
            Encoder::Gzip(e) => e.write_all(data),
            Encoder::Br(e) => e.write_all(data),
            Encoder::Zstd(e) => e.write_all(data),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // gzip: a sync flush (an empty stored block ends the deflate
        // data so far); brotli: BROTLI_OPERATION_FLUSH; zstd: the block
        // ends. Each makes all input so far decodable.
        match self {
            Encoder::Gzip(e) => e.flush(),
            Encoder::Br(e) => e.flush(),
            Encoder::Zstd(e) => e.flush(),
        }
    }

    /// What the encoder has made so far, moved to `out`.
    fn drain(&mut self, out: &mut Vec<u8>) {
        let made = match self {
            Encoder::Gzip(e) => e.get_mut(),
            Encoder::Br(e) => e.get_mut(),
            Encoder::Zstd(e) => e.get_mut(),
        };
        out.append(made);
    }

    /// The end of the stream (the coding's trailer) into `out`.
    fn finish(self, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut made = match self {
            Encoder::Gzip(e) => e.finish()?,
            Encoder::Br(e) => e.into_inner(),
            Encoder::Zstd(e) => e.finish()?,
        };
        out.append(&mut made);
        Ok(())
    }
}

/// A response being compressed.
pub(crate) struct Compressing {
    coding: Coding,
    level: i32,
    hint: Option<u64>,
    /// Made at the first piece of body.
    enc: Option<Encoder>,
    /// The encoder failed: the rest of the body is dropped (the response
    /// is cut; its bytes so far cannot be repaired).
    failed: bool,
}

impl Compressing {
    pub(super) fn new(coding: Coding, level: i32, hint: Option<u64>) -> Compressing {
        Compressing {
            coding,
            level,
            hint,
            enc: None,
            failed: false,
        }
    }

    fn encoder(&mut self) -> Option<&mut Encoder> {
        if self.failed {
            return None;
        }
        if self.enc.is_none() {
            match Encoder::new(self.coding, self.level, self.hint) {
                Ok(e) => self.enc = Some(e),
                Err(e) => return self.fail(&e),
            }
        }
        self.enc.as_mut()
    }

    fn fail(&mut self, e: &std::io::Error) -> Option<&mut Encoder> {
        tracing::error!("compress: {} encoder: {e}", self.coding.token());
        self.failed = true;
        self.enc = None;
        None
    }
}

impl BodyFilter for Compressing {
    fn data(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let Some(enc) = self.encoder() else { return };
        match enc.write(input) {
            Ok(()) => enc.drain(out),
            Err(e) => {
                self.fail(&e);
            }
        }
    }

    fn flush(&mut self, out: &mut Vec<u8>) {
        // Nothing written yet: nothing to flush (no empty gzip member).
        let Some(enc) = self.enc.as_mut() else { return };
        match enc.flush() {
            Ok(()) => enc.drain(out),
            Err(e) => {
                self.fail(&e);
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        // An empty body still gets a whole (empty) stream: the head said
        // Content-Encoding.
        if self.encoder().is_none() {
            return;
        }
        if let Some(enc) = self.enc.take() {
            if let Err(e) = enc.finish(out) {
                self.fail(&e);
            }
        }
    }

    fn whole(&mut self, version: &FileVersion, body: Whole<'_>) -> Option<Bytes> {
        if version.size > MAX_KEPT_FILE {
            return None;
        }
        let key = Key {
            version: *version,
            coding: self.coding,
            level: self.level,
        };
        if let Some(made) = cache::get(&key) {
            return Some(made);
        }
        let read;
        let src: &[u8] = match body {
            Whole::Mem(b) => b,
            Whole::File(f) => {
                let mut v = vec![0; version.size as usize];
                if let Err(e) = f.read_exact_at(&mut v, 0) {
                    tracing::error!("compress: reading a file: {e}");
                    return None;
                }
                read = v;
                &read
            }
        };
        if src.len() as u64 != version.size {
            return None;
        }
        let mut out = Vec::with_capacity(src.len() / 3 + 64);
        let mut enc = match Encoder::new(self.coding, self.level, Some(version.size)) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!("compress: {} encoder: {e}", self.coding.token());
                return None;
            }
        };
        if let Err(e) = enc.write(src).and_then(|()| enc.finish(&mut out)) {
            tracing::error!("compress: {} encoder: {e}", self.coding.token());
            return None;
        }
        let made = Bytes::from(out);
        cache::put(key, made.clone());
        Some(made)
    }
}
