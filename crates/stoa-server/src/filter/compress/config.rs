//! The `compress` key of a site or a route: `true` (the defaults),
//! `false` (off: on a route, lifts the site's), or a table:
//!
//! ```toml
//! compress = { encodings = ["zstd", "br", "gzip"], types = ["text/*"],
//!              min_length = 256, gzip_level = 6, brotli_level = 5, zstd_level = 3 }
//! ```
//!
//! Unset keys of a table take the defaults. docs/CONFIG.md has the
//! reference and the nginx and Caddy equivalents.

use super::{Coding, Compress};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

/// Media types compressed by default: text, and the structured and
/// script formats that compress well (Caddy's `encode` list, with wasm
/// and the `+json`/`+xml` families). Images other than SVG, fonts in
/// woff/woff2, archives and video are compressed already.
pub(crate) const DEFAULT_TYPES: &[&str] = &[
    "text/*",
    "application/json",
    "application/*+json",
    "application/javascript",
    "application/x-javascript",
    "application/ecmascript",
    "application/xml",
    "application/*+xml",
    "application/wasm",
    "application/x-ndjson",
    "application/manifest+json",
    "image/svg+xml",
    "image/x-icon",
    "image/vnd.microsoft.icon",
    "image/bmp",
    "font/ttf",
    "font/otf",
    "application/vnd.ms-fontobject",
];

/// As in the `compress` table of HELPERS' decided keys: zstd first (the
/// cheapest for its ratio), then brotli, then gzip, which every client
/// takes.
const DEFAULT_CODINGS: &[Coding] = &[Coding::Zstd, Coding::Br, Coding::Gzip];

/// A body shorter than this gains little (the coding's own framing, a
/// packet either way); nginx's `gzip_min_length` is 20, Caddy's 512.
const DEFAULT_MIN_LENGTH: u64 = 256;

/// `compress` as written: a switch or a table.
#[derive(Debug, Clone)]
pub(crate) enum CompressSetting {
    On(bool),
    Table(CompressTable),
}

/// The table form of `compress`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompressTable {
    /// Offered codings, the server's preference first: "zstd", "br",
    /// "gzip".
    encodings: Option<Vec<String>>,
    /// Media types: `text/html`, `text/*`, `application/*+json`.
    types: Option<Vec<String>>,
    /// Bodies announced shorter than this many bytes are not compressed
    /// (a streamed body of unknown length is).
    min_length: Option<u64>,
    /// 1 (fastest) to 9 (smallest); default 6.
    gzip_level: Option<u32>,
    /// 0 to 11; default 5.
    brotli_level: Option<u32>,
    /// 1 to 19 (20-22, "ultra", are refused: their windows are too
    /// large to stream to many clients); default 3.
    zstd_level: Option<i32>,
}

impl<'de> Deserialize<'de> for CompressSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CompressSetting;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("true, false or a table")
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<CompressSetting, E> {
                Ok(CompressSetting::On(b))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<CompressSetting, A::Error> {
                CompressTable::deserialize(de::value::MapAccessDeserializer::new(m))
                    .map(CompressSetting::Table)
            }
        }
        d.deserialize_any(V)
    }
}

impl CompressSetting {
    /// The runtime filter, or None when compression is off.
    pub(crate) fn build(&self) -> Result<Option<Compress>, String> {
        let t = match self {
            CompressSetting::On(false) => return Ok(None),
            CompressSetting::On(true) => &CompressTable::default(),
            CompressSetting::Table(t) => t,
        };
        let codings = match &t.encodings {
            None => DEFAULT_CODINGS.to_vec(),
            Some(names) => {
                let mut v = Vec::new();
                for n in names {
                    let c = Coding::from_token(n.as_bytes())
                        .ok_or_else(|| format!("unknown encoding {n:?} (zstd, br or gzip)"))?;
                    if !v.contains(&c) {
                        v.push(c);
                    }
                }
                if v.is_empty() {
                    return Err("`encodings` is empty (use compress = false)".into());
                }
                v
            }
        };
        let types: Vec<Box<str>> = match &t.types {
            None => DEFAULT_TYPES.iter().map(|&s| s.into()).collect(),
            Some(list) => {
                for ty in list {
                    let ok = ty
                        .split_once('/')
                        .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty() && !a.contains('*'));
                    if !ok || ty.contains(';') {
                        return Err(format!(
                            "{ty:?} is not a media type (\"text/html\", \"text/*\", \"application/*+json\")"
                        ));
                    }
                }
                list.iter().map(|s| s.to_ascii_lowercase().into()).collect()
            }
        };
        let gzip_level = t.gzip_level.unwrap_or(6);
        if !(1..=9).contains(&gzip_level) {
            return Err(format!("gzip_level {gzip_level} is not 1 to 9"));
        }
        let brotli_level = t.brotli_level.unwrap_or(5);
        if brotli_level > 11 {
            return Err(format!("brotli_level {brotli_level} is not 0 to 11"));
        }
        let zstd_level = t.zstd_level.unwrap_or(3);
        if !(1..=19).contains(&zstd_level) {
            return Err(format!("zstd_level {zstd_level} is not 1 to 19"));
        }
        Ok(Some(Compress {
            codings,
            types,
            min_length: t.min_length.unwrap_or(DEFAULT_MIN_LENGTH),
            gzip_level,
            brotli_level,
            zstd_level,
        }))
    }
}
