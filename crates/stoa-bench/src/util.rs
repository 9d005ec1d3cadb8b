//! Small parsers and helpers shared by the CLI and the scenario loader:
//! durations, sizes, Basic-auth base64, and a seeded random generator.

use std::time::Duration;

/// Parses a duration: `10` (seconds), `1.5s`, `250ms`, `2m`, `1h`, `100us`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.trim().parse().ok()?;
    if !v.is_finite() || v < 0.0 || v * mult > 1e9 {
        return None;
    }
    Some(Duration::from_secs_f64(v * mult))
}

/// Parses a byte size: `61MB`, `512k`, `1.5GiB`, `1000` (bytes). K/M/G are
/// powers of 1024 with or without `i`, as `du` and WebBench count them.
pub fn parse_size(s: &str) -> Option<u64> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (num, unit) = lower.split_at(digits_end);
    let mult: f64 = match unit.trim() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let v: f64 = num.parse().ok()?;
    if !v.is_finite() || v < 0.0 || v * mult > 1e15 {
        return None;
    }
    Some((v * mult).round() as u64)
}

/// Standard base64 (RFC 4648 §4) with padding, for `Authorization: Basic`.
pub fn base64(input: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for c in input.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        out.push(A[(n >> 18) as usize & 63] as char);
        out.push(A[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if c.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// Percent-encodes a form field for `application/x-www-form-urlencoded`
/// (HTML's form encoding: space becomes `+`).
pub fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A time as RFC 3339 UTC to the millisecond (`2026-11-25T04:08:40.123Z`).
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86400) as i64, secs % 86400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Quotes an argument for a POSIX shell when it needs it.
pub fn shell_quote(a: &str) -> String {
    let plain = !a.is_empty()
        && a.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=,@%+".contains(&b));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// [`form_encode`], but the request placeholders (`{client}`, `{seq}`,
/// `{seq/N}`, `{seq%N}`) stay as they are, to be replaced by digits (which need no encoding).
pub fn form_encode_keeping_placeholders(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while !rest.is_empty() {
        let b = rest.as_bytes();
        let next =
            (0..b.len()).find_map(|i| crate::plan::placeholder_at(&b[i..]).map(|(_, n)| (i, n)));
        match next {
            Some((i, n)) => {
                out.push_str(&form_encode(&rest[..i]));
                out.push_str(&rest[i..i + n]);
                rest = &rest[i + n..];
            }
            None => {
                out.push_str(&form_encode(rest));
                rest = "";
            }
        }
    }
    out
}

/// A small, fast, seedable generator (SplitMix64 seeding xoshiro256**).
/// Scenario runs must repeat exactly with the same seed, on any machine, so
/// the algorithm is fixed here rather than borrowed from a crate whose
/// stream may change between versions.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator for stream `stream` of seed `seed` (one stream per
    /// client, so a client's choices do not depend on which thread runs it).
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut x = seed ^ stream.wrapping_mul(0xD134_2543_DE82_EF95);
        Rng {
            s: [
                splitmix(&mut x),
                splitmix(&mut x),
                splitmix(&mut x),
                splitmix(&mut x),
            ],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let r = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n) (n > 0), without modulo bias worth noticing for
    /// the small n of a URL mix.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_the_units_of_ab_and_wrk() {
        assert_eq!(parse_duration("10"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("-1"), None);
        assert_eq!(parse_duration("abc"), None);
    }

    #[test]
    fn sizes_count_in_powers_of_1024() {
        assert_eq!(parse_size("61MB"), Some(61 * 1024 * 1024));
        assert_eq!(parse_size("1k"), Some(1024));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("1.5KiB"), Some(1536));
        assert_eq!(parse_size("12q"), None);
    }

    #[test]
    fn base64_matches_rfc4648_test_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o);
        }
    }

    #[test]
    fn times_print_as_rfc3339_utc() {
        let t = std::time::UNIX_EPOCH + Duration::from_millis(1_764_043_720_123);
        assert_eq!(rfc3339(t), "2025-11-25T04:08:40.123Z");
        assert_eq!(rfc3339(std::time::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = std::time::UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(t), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn arguments_are_quoted_for_a_shell_only_when_needed() {
        assert_eq!(shell_quote("-kc10"), "-kc10");
        assert_eq!(shell_quote("http://h:1/a?b=1"), "'http://h:1/a?b=1'");
        assert_eq!(shell_quote("X-A: 1"), "'X-A: 1'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn form_encoding_escapes_reserved_bytes() {
        assert_eq!(form_encode("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
    }

    #[test]
    fn the_generator_repeats_with_a_seed_and_differs_between_streams() {
        let a: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::new(42, 1);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::new(42, 1);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..5)
            .map({
                let mut r = Rng::new(42, 2);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut r = Rng::new(7, 0);
        for _ in 0..1000 {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            assert!(r.below(3) < 3);
        }
    }
}
