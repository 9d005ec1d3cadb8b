//! The units configuration values are written in, for every table of
//! `stoa.toml` (the server's and each handler's, filter's and check's):
//! durations and byte sizes. A leaf: it imports nothing of the crate.

use serde::de::{self, Deserializer};
use serde::Deserialize;
use std::time::Duration;

/// A duration written as `"10s"`, `"500ms"`, `"2m"`, `"1h"` or a bare
/// number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        int_or_str(
            d,
            |n| Dur(Duration::from_secs(n)),
            |s| parse_duration(s).map(Dur),
        )
    }
}

/// Deserializes a value written either as a bare integer or as a string
/// with a unit; errors carry the TOML span, so messages name the line.
fn int_or_str<'de, D: Deserializer<'de>, T>(
    d: D,
    from_int: impl Fn(u64) -> T,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<T, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Int(u64),
        Str(String),
    }
    match Raw::deserialize(d)? {
        Raw::Int(n) => Ok(from_int(n)),
        Raw::Str(s) => parse(&s).map_err(de::Error::custom),
    }
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (write e.g. \"10s\", \"500ms\", \"2m\")"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use ms, s, m or h)")),
    };
    if !(0.0..=1e9).contains(&secs) {
        return Err(format!("`{s}` is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A byte size written as `16384`, `"16 KiB"`, `"16 MiB"`, `"1 GB"`...
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        int_or_str(d, Size, |s| parse_size(s).map(Size))
    }
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (write e.g. 16384 or \"16 MiB\")"))?;
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "`{s}`: unknown unit `{unit}` (use B, KiB, MiB, GiB, kB, MB or GB)"
            ))
        }
    };
    n.checked_mul(mul)
        .ok_or_else(|| format!("`{s}` is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_parse_with_units() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("fast").is_err());
        assert_eq!(parse_size("16 MiB").unwrap(), 16 << 20);
        assert_eq!(parse_size("16kb").unwrap(), 16_000);
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert!(parse_size("99999999999 GiB").is_err());
        assert!(parse_size("lots").is_err());
    }
}
