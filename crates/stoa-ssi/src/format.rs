//! Formatting and encoding helpers, each matching the Apache function
//! mod_include calls, so that pages print what they printed under Apache:
//! `strftime` in the C locale (`ap_ht_time`), `apr_strfsize`, the
//! `ap_escape_*` and `ap_unescape_*` families, `decodehtml` and base64.
//!
//! Values are bytes, not `str`: Apache treats them as C strings, and a page
//! in Latin-1 must come out unchanged.

/// Apache's default `timefmt`.
pub const DEFAULT_TIMEFMT: &[u8] = b"%A, %d-%b-%Y %H:%M:%S %Z";

/// A time zone at one moment: what `localtime_r` would say. The crate does
/// no I/O, so the server supplies it (see [`crate::Env::zone`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// Seconds east of UTC.
    pub offset: i32,
    /// The abbreviation `%Z` prints (`CET`, `UTC`).
    pub name: String,
}

impl Zone {
    /// UTC under the name glibc gives it when TZ is unset.
    pub fn utc() -> Zone {
        Zone {
            offset: 0,
            name: "UTC".to_owned(),
        }
    }

    /// What `ap_ht_time(..., gmt = 1)` prints: `%Z` is `GMT`, `%z` `+0000`.
    pub fn gmt() -> Zone {
        Zone {
            offset: 0,
            name: "GMT".to_owned(),
        }
    }
}

/// A broken-down time, as `struct tm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tm {
    year: i64,
    /// 1..=12
    month: u32,
    /// 1..=31
    day: u32,
    hour: u32,
    min: u32,
    sec: u32,
    /// 0 = Sunday
    wday: u32,
    /// 0..=365
    yday: u32,
}

/// Days since 1970-01-01 to a civil date (proleptic Gregorian), by
/// Howard Hinnant's algorithm: exact for every i64 day count we can get
/// from an i64 of seconds.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn tm_from_unix(t: i64, offset: i32) -> Tm {
    let t = t.saturating_add(i64::from(offset));
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    const CUM: [u32; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let leap = u32::from(month > 2 && is_leap(year));
    Tm {
        year,
        month,
        day,
        hour: (secs / 3600) as u32,
        min: (secs % 3600 / 60) as u32,
        sec: (secs % 60) as u32,
        wday: (days + 4).rem_euclid(7) as u32,
        yday: CUM[(month - 1) as usize] + day - 1 + leap,
    }
}

const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// How a numeric conversion is padded: glibc's `-`, `_` and `0` flags.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pad {
    Default,
    None,
    Space,
    Zero,
}

fn num(out: &mut Vec<u8>, v: i64, width: usize, default_space: bool, pad: Pad) {
    let s = v.unsigned_abs().to_string();
    if v < 0 {
        out.push(b'-');
    }
    let fill = match pad {
        Pad::None => None,
        Pad::Space => Some(b' '),
        Pad::Zero => Some(b'0'),
        Pad::Default if default_space => Some(b' '),
        Pad::Default => Some(b'0'),
    };
    if let Some(f) = fill {
        for _ in s.len()..width {
            out.push(f);
        }
    }
    out.extend_from_slice(s.as_bytes());
}

/// ISO 8601 week-based year and week number (`%G`, `%V`).
fn iso_week(tm: &Tm) -> (i64, u32) {
    let wday = (tm.wday + 6) % 7; // Monday = 0
    let yday = i64::from(tm.yday);
    let week = (yday - i64::from(wday) + 10) / 7;
    let weeks_in = |y: i64| {
        // A year has 53 weeks when it starts on a Thursday, or on a
        // Wednesday in a leap year.
        let jan1 = (days_from_civil(y, 1, 1) + 4).rem_euclid(7); // 0 = Sunday
        if jan1 == 4 || (jan1 == 3 && is_leap(y)) {
            53
        } else {
            52
        }
    };
    if week < 1 {
        (tm.year - 1, weeks_in(tm.year - 1))
    } else if week > i64::from(weeks_in(tm.year)) {
        (tm.year + 1, 1)
    } else {
        (tm.year, week as u32)
    }
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `strftime(fmt)` in the C locale for the moment `t` (Unix seconds) in
/// `zone`, as Apache's `ap_ht_time` prints it. Supports the conversions
/// of C99 and glibc that do not depend on a locale beyond "C": `%a %A %b
/// %B %c %C %d %D %e %F %g %G %h %H %I %j %k %l %m %M %n %p %P %r %R %s %S
/// %t %T %u %U %V %w %W %x %X %y %Y %z %Z %%`, the flags `-` `_` `0`, and
/// ignores the `E`/`O` modifiers. Anything else is copied as written, as
/// glibc does.
pub fn strftime(fmt: &[u8], t: i64, zone: &Zone) -> Vec<u8> {
    let tm = tm_from_unix(t, zone.offset);
    let mut out = Vec::with_capacity(fmt.len() + 16);
    format_tm(&mut out, fmt, &tm, t, zone);
    out
}

fn format_tm(out: &mut Vec<u8>, fmt: &[u8], tm: &Tm, t: i64, zone: &Zone) {
    let mut i = 0;
    while i < fmt.len() {
        let c = fmt[i];
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let mut pad = Pad::Default;
        while let Some(&f) = fmt.get(i) {
            match f {
                b'-' => pad = Pad::None,
                b'_' => pad = Pad::Space,
                b'0' => pad = Pad::Zero,
                _ => break,
            }
            i += 1;
        }
        if matches!(fmt.get(i), Some(b'E' | b'O')) {
            i += 1;
        }
        let Some(&conv) = fmt.get(i) else {
            // A lone '%' at the end is printed as written.
            out.extend_from_slice(&fmt[start..]);
            return;
        };
        i += 1;
        let hour12 = if tm.hour.is_multiple_of(12) {
            12
        } else {
            tm.hour % 12
        };
        match conv {
            b'a' => out.extend_from_slice(&DAYS[tm.wday as usize].as_bytes()[..3]),
            b'A' => out.extend_from_slice(DAYS[tm.wday as usize].as_bytes()),
            b'b' | b'h' => out.extend_from_slice(&MONTHS[(tm.month - 1) as usize].as_bytes()[..3]),
            b'B' => out.extend_from_slice(MONTHS[(tm.month - 1) as usize].as_bytes()),
            b'c' => format_tm(out, b"%a %b %e %H:%M:%S %Y", tm, t, zone),
            b'C' => num(out, tm.year.div_euclid(100), 2, false, pad),
            b'd' => num(out, i64::from(tm.day), 2, false, pad),
            b'D' | b'x' => format_tm(out, b"%m/%d/%y", tm, t, zone),
            b'e' => num(out, i64::from(tm.day), 2, true, pad),
            b'F' => format_tm(out, b"%Y-%m-%d", tm, t, zone),
            b'g' => num(out, iso_week(tm).0.rem_euclid(100), 2, false, pad),
            b'G' => num(out, iso_week(tm).0, 1, false, pad),
            b'H' => num(out, i64::from(tm.hour), 2, false, pad),
            b'I' => num(out, i64::from(hour12), 2, false, pad),
            b'j' => num(out, i64::from(tm.yday) + 1, 3, false, pad),
            b'k' => num(out, i64::from(tm.hour), 2, true, pad),
            b'l' => num(out, i64::from(hour12), 2, true, pad),
            b'm' => num(out, i64::from(tm.month), 2, false, pad),
            b'M' => num(out, i64::from(tm.min), 2, false, pad),
            b'n' => out.push(b'\n'),
            b'p' => out.extend_from_slice(if tm.hour < 12 { b"AM" } else { b"PM" }),
            b'P' => out.extend_from_slice(if tm.hour < 12 { b"am" } else { b"pm" }),
            b'r' => format_tm(out, b"%I:%M:%S %p", tm, t, zone),
            b'R' => format_tm(out, b"%H:%M", tm, t, zone),
            b's' => num(out, t, 1, false, pad),
            b'S' => num(out, i64::from(tm.sec), 2, false, pad),
            b't' => out.push(b'\t'),
            b'T' | b'X' => format_tm(out, b"%H:%M:%S", tm, t, zone),
            b'u' => num(out, i64::from((tm.wday + 6) % 7 + 1), 1, false, pad),
            b'U' => num(out, i64::from((tm.yday + 7 - tm.wday) / 7), 2, false, pad),
            b'V' => num(out, i64::from(iso_week(tm).1), 2, false, pad),
            b'w' => num(out, i64::from(tm.wday), 1, false, pad),
            b'W' => num(
                out,
                i64::from((tm.yday + 7 - (tm.wday + 6) % 7) / 7),
                2,
                false,
                pad,
            ),
            b'y' => num(out, tm.year.rem_euclid(100), 2, false, pad),
            b'Y' => num(out, tm.year, 1, false, pad),
            b'z' => {
                let off = zone.offset;
                out.push(if off < 0 { b'-' } else { b'+' });
                let a = off.unsigned_abs();
                num(
                    out,
                    i64::from(a / 3600 * 100 + a % 3600 / 60),
                    4,
                    false,
                    Pad::Zero,
                );
            }
            b'Z' => out.extend_from_slice(zone.name.as_bytes()),
            b'%' => out.push(b'%'),
            _ => out.extend_from_slice(&fmt[start..i]),
        }
    }
}

/// `apr_strfsize`: always four characters, as `config sizefmt="abbrev"`
/// prints them: `"  5 "`, `"1.0K"`, `" 10K"`, `"1.2M"`.
pub fn strfsize(size: u64) -> Vec<u8> {
    if size < 973 {
        return format!("{size:>3} ").into_bytes();
    }
    const ORD: &[u8] = b"KMGTPE";
    let mut size = size;
    let mut o = 0;
    loop {
        let mut remain = size & 1023;
        size >>= 10;
        if size >= 973 {
            o += 1;
            continue;
        }
        let unit = char::from(ORD[o.min(ORD.len() - 1)]);
        if size < 9 || (size == 9 && remain < 973) {
            remain = (remain * 5 + 256) / 512;
            if remain >= 10 {
                size += 1;
                remain = 0;
            }
            return format!("{size}.{remain}{unit}").into_bytes();
        }
        if remain >= 512 {
            size += 1;
        }
        return format!("{size:>3}{unit}").into_bytes();
    }
}

/// `config sizefmt="bytes"`: the decimal size with a comma every three
/// digits (`1,234,567`).
pub fn size_in_bytes(size: u64) -> Vec<u8> {
    let digits = size.to_string().into_bytes();
    let mut out = Vec::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(b',');
        }
        out.push(*d);
    }
    out
}

/// `ap_escape_html`: `<`, `>`, `&` and `"` become entities (not `'`).
pub fn escape_html(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for &c in s {
        match c {
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'&' => out.extend_from_slice(b"&amp;"),
            b'"' => out.extend_from_slice(b"&quot;"),
            _ => out.push(c),
        }
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex(out: &mut Vec<u8>, c: u8) {
    out.push(b'%');
    out.push(HEX[usize::from(c >> 4)]);
    out.push(HEX[usize::from(c & 15)]);
}

/// `ap_escape_uri` (`ap_os_escape_path(.., partial = 1)`): everything but
/// alphanumerics and `$-_.+!*'(),:;@&=/~` as `%xx` (lower-case hex, as
/// Apache writes it).
pub fn escape_uri(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for &c in s {
        if c.is_ascii_alphanumeric() || b"$-_.+!*'(),:;@&=/~".contains(&c) {
            out.push(c);
        } else {
            push_hex(&mut out, c);
        }
    }
    out
}

/// `ap_escape_urlencoded`: form encoding; space is `+`, alphanumerics and
/// `.-*_` stay, the rest is `%xx`.
pub fn escape_urlencoded(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for &c in s {
        if c.is_ascii_alphanumeric() || b".-*_".contains(&c) {
            out.push(c);
        } else if c == b' ' {
            out.push(b'+');
        } else {
            push_hex(&mut out, c);
        }
    }
    out
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// A C string ends at its first NUL: values decoded to contain one are
/// cut there, as they are in Apache.
fn c_string(mut v: Vec<u8>) -> Vec<u8> {
    if let Some(n) = memchr::memchr(0, &v) {
        v.truncate(n);
    }
    v
}

/// `ap_unescape_url`: `%xx` decoded; a bad escape stays as written; a
/// decoded NUL ends the string.
pub fn unescape_url(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            if let (Some(h), Some(l)) = (
                s.get(i + 1).copied().and_then(hex_val),
                s.get(i + 2).copied().and_then(hex_val),
            ) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    c_string(out)
}

/// `ap_unescape_urlencoded`: `+` is a space, then as [`unescape_url`].
pub fn unescape_urlencoded(s: &[u8]) -> Vec<u8> {
    let plus: Vec<u8> = s
        .iter()
        .map(|&c| if c == b'+' { b' ' } else { c })
        .collect();
    unescape_url(&plus)
}

/// `ap_escape_shell_cmd`: a backslash before each of
/// ``&;`'"|*?~<>^()[]{}$\`` and newline.
pub fn escape_shell_cmd(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for &c in s {
        if b"&;`'\"|*?~<>^()[]{}$\\\n".contains(&c) {
            out.push(b'\\');
        }
        out.push(c);
    }
    out
}

/// `QUERY_STRING_UNESCAPED` as mod_include defines it from the raw query
/// string: URL-decoded, then shell-escaped.
pub fn query_string_unescaped(query: &[u8]) -> Vec<u8> {
    escape_shell_cmd(&unescape_url(query))
}

/// The Latin-1 entities `decodehtml` knows, with the byte each stands for.
const ENTITIES: &[(&[u8], u8)] = &[
    (b"lt", 0x3c),
    (b"gt", 0x3e),
    (b"amp", 0x26),
    (b"ETH", 0xd0),
    (b"eth", 0xf0),
    (b"quot", 0x22),
    (b"Auml", 0xc4),
    (b"Euml", 0xcb),
    (b"Iuml", 0xcf),
    (b"Ouml", 0xd6),
    (b"Uuml", 0xdc),
    (b"auml", 0xe4),
    (b"euml", 0xeb),
    (b"iuml", 0xef),
    (b"ouml", 0xf6),
    (b"uuml", 0xfc),
    (b"yuml", 0xff),
    (b"Acirc", 0xc2),
    (b"Aring", 0xc5),
    (b"AElig", 0xc6),
    (b"Ecirc", 0xca),
    (b"Icirc", 0xce),
    (b"Ocirc", 0xd4),
    (b"Ucirc", 0xdb),
    (b"THORN", 0xde),
    (b"szlig", 0xdf),
    (b"acirc", 0xe2),
    (b"aring", 0xe5),
    (b"aelig", 0xe6),
    (b"ecirc", 0xea),
    (b"icirc", 0xee),
    (b"ocirc", 0xf4),
    (b"ucirc", 0xfb),
    (b"thorn", 0xfe),
    (b"Agrave", 0xc0),
    (b"Aacute", 0xc1),
    (b"Atilde", 0xc3),
    (b"Ccedil", 0xc7),
    (b"Egrave", 0xc8),
    (b"Eacute", 0xc9),
    (b"Igrave", 0xcc),
    (b"Iacute", 0xcd),
    (b"Ntilde", 0xd1),
    (b"Ograve", 0xd2),
    (b"Oacute", 0xd3),
    (b"Otilde", 0xd5),
    (b"Oslash", 0xd8),
    (b"Ugrave", 0xd9),
    (b"Uacute", 0xda),
    (b"Yacute", 0xdd),
    (b"agrave", 0xe0),
    (b"aacute", 0xe1),
    (b"atilde", 0xe3),
    (b"ccedil", 0xe7),
    (b"egrave", 0xe8),
    (b"eacute", 0xe9),
    (b"igrave", 0xec),
    (b"iacute", 0xed),
    (b"ntilde", 0xf1),
    (b"ograve", 0xf2),
    (b"oacute", 0xf3),
    (b"otilde", 0xf5),
    (b"oslash", 0xf8),
    (b"ugrave", 0xf9),
    (b"uacute", 0xfa),
    (b"yacute", 0xfd),
];

/// mod_include's `decodehtml`, applied to most attribute values: the
/// Latin-1 entities above and `&#NNN;` become single bytes. An unknown
/// entity stays as written; a numeric reference to a control character or
/// beyond 255 (or with a non-digit, like `&#x41;`) is deleted.
pub fn decode_html(s: &[u8]) -> Vec<u8> {
    if memchr::memchr(b'&', s).is_none() {
        return s.to_vec();
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] != b'&' {
            out.push(s[i]);
            i += 1;
            continue;
        }
        // The reference runs to the next ';' however far; none: data.
        let Some(semi) = memchr::memchr(b';', &s[i..]) else {
            out.push(b'&');
            i += 1;
            continue;
        };
        let body = &s[i + 1..i + semi];
        if let Some(digits) = body.strip_prefix(b"#") {
            let mut val: u32 = 0;
            let mut all_digits = true;
            for &d in digits {
                if !d.is_ascii_digit() {
                    all_digits = false;
                    break;
                }
                val = val.saturating_mul(10).saturating_add(u32::from(d - b'0'));
            }
            i += semi + 1;
            let unused = val <= 8 || (11..=31).contains(&val) || (127..=160).contains(&val);
            if all_digits && !unused && val < 256 {
                out.push(val as u8);
            }
            continue;
        }
        match ENTITIES.iter().find(|(name, _)| *name == body) {
            Some((_, byte)) => {
                out.push(*byte);
                i += semi + 1;
            }
            None => {
                out.push(b'&');
                i += 1;
            }
        }
    }
    out
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `ap_pbase64encode`: standard alphabet, padded.
pub fn base64_encode(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len().div_ceil(3) * 4);
    for chunk in s.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        out.push(B64[(n >> 18) as usize & 63]);
        out.push(B64[(n >> 12) as usize & 63]);
        out.push(if chunk.len() > 1 {
            B64[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(if chunk.len() > 2 {
            B64[n as usize & 63]
        } else {
            b'='
        });
    }
    out
}

/// `ap_pbase64decode`: decodes the leading run of base64 characters and
/// ignores the rest (padding included), as APR does; the result ends at a
/// decoded NUL like every C string.
pub fn base64_decode(s: &[u8]) -> Vec<u8> {
    let val = |c: u8| B64.iter().position(|&b| b == c).map(|p| p as u32);
    let vals: Vec<u32> = s.iter().map_while(|&c| val(c)).collect();
    let mut out = Vec::with_capacity(vals.len() * 3 / 4);
    for chunk in vals.chunks(4) {
        let mut n = 0u32;
        for (k, v) in chunk.iter().enumerate() {
            n |= v << (18 - 6 * k);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        // 2 characters carry one byte, 3 two, 4 three; 1 carries none.
        let take = chunk.len().saturating_sub(1);
        out.extend_from_slice(&bytes[..take]);
    }
    c_string(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_700_000_000; // Tue, 14 Nov 2023 22:13:20 UTC

    fn f(fmt: &str, t: i64, zone: &Zone) -> String {
        String::from_utf8(strftime(fmt.as_bytes(), t, zone)).unwrap()
    }

    #[test]
    fn the_default_timefmt_prints_like_apache() {
        assert_eq!(
            f("%A, %d-%b-%Y %H:%M:%S %Z", T, &Zone::gmt()),
            "Tuesday, 14-Nov-2023 22:13:20 GMT"
        );
    }

    #[test]
    fn every_common_conversion_matches_glibc_in_the_c_locale() {
        let z = Zone::utc();
        assert_eq!(
            f("%a %b %e %j %m %y %I %p %s %%", T, &z),
            "Tue Nov 14 318 11 23 10 PM 1700000000 %"
        );
        assert_eq!(f("%c", T, &z), "Tue Nov 14 22:13:20 2023");
        assert_eq!(
            f("%D %F %T %R %r", T, &z),
            "11/14/23 2023-11-14 22:13:20 22:13 10:13:20 PM"
        );
        assert_eq!(
            f("%u %w %U %W %V %G %g %C", T, &z),
            "2 2 46 46 46 2023 23 20"
        );
        assert_eq!(f("%e|%-d|%_m|%k|%l", 0, &z), " 1|1| 1| 0|12");
        assert_eq!(f("%Q %", 0, &z), "%Q %");
        assert_eq!(f("%Ey %Od", 0, &z), "70 01");
    }

    #[test]
    fn a_zone_offset_moves_the_clock_and_prints_in_z() {
        let cet = Zone {
            offset: 3600,
            name: "CET".into(),
        };
        assert_eq!(f("%H:%M %z %Z", T, &cet), "23:13 +0100 CET");
        let west = Zone {
            offset: -(5 * 3600 + 1800),
            name: "X".into(),
        };
        assert_eq!(f("%d %H:%M %z", T, &west), "14 16:43 -0530");
    }

    #[test]
    fn dates_before_1970_and_leap_days_convert() {
        let z = Zone::utc();
        assert_eq!(f("%F %a %j", -86_400, &z), "1969-12-31 Wed 365");
        assert_eq!(f("%F %j", 951_782_400, &z), "2000-02-29 060");
        assert_eq!(f("%F %V %G", 1_104_537_600, &z), "2005-01-01 53 2004");
        // Extreme times do not panic.
        let _ = strftime(b"%c %G %V", i64::MAX, &z);
        let _ = strftime(b"%c %G %V", i64::MIN, &z);
    }

    #[test]
    fn sizes_abbreviate_like_apr_strfsize() {
        let s = |n| String::from_utf8(strfsize(n)).unwrap();
        assert_eq!(s(0), "  0 ");
        assert_eq!(s(972), "972 ");
        assert_eq!(s(973), "1.0K");
        assert_eq!(s(1024), "1.0K");
        assert_eq!(s(1500), "1.5K");
        assert_eq!(s(10_240), " 10K");
        assert_eq!(s(1_258_291), "1.2M");
        assert_eq!(s(5 << 30), "5.0G");
        assert_eq!(s(u64::MAX), " 16E");
        assert_eq!(
            String::from_utf8(size_in_bytes(1_234_567)).unwrap(),
            "1,234,567"
        );
        assert_eq!(String::from_utf8(size_in_bytes(123)).unwrap(), "123");
        assert_eq!(
            String::from_utf8(size_in_bytes(123_456)).unwrap(),
            "123,456"
        );
    }

    #[test]
    fn escapes_match_apache() {
        assert_eq!(
            escape_html(b"<a href=\"x\">&'"),
            b"&lt;a href=&quot;x&quot;&gt;&amp;'"
        );
        assert_eq!(escape_uri(b"/a b/\xe9?x=1#"), b"/a%20b/%e9%3fx=1%23");
        assert_eq!(escape_urlencoded(b"a b&c/"), b"a+b%26c%2f");
        assert_eq!(unescape_url(b"a%20b%zz%4"), b"a b%zz%4");
        assert_eq!(unescape_url(b"a%00b"), b"a");
        assert_eq!(unescape_urlencoded(b"a+b%2B"), b"a b+");
        assert_eq!(query_string_unescaped(b"a=%3Cb%3E&c"), b"a=\\<b\\>\\&c");
    }

    #[test]
    fn html_decoding_follows_decodehtml() {
        assert_eq!(decode_html(b"&lt;&amp;&quot;&eacute;"), b"<&\"\xe9");
        assert_eq!(decode_html(b"&#65;&#9;&#7;&#300;&#x41;"), b"A\t");
        assert_eq!(decode_html(b"&nbsp; &foo"), b"&nbsp; &foo");
        assert_eq!(decode_html(b"a & b; c"), b"a & b; c");
        assert_eq!(decode_html(b"&#99999999999999;x"), b"x");
    }

    #[test]
    fn base64_round_trips_and_decodes_leniently() {
        for s in [&b""[..], b"a", b"ab", b"abc", b"abcd", b"\xff\xfe"] {
            assert_eq!(base64_decode(&base64_encode(s)), s);
        }
        assert_eq!(base64_encode(b"hello"), b"aGVsbG8=");
        assert_eq!(base64_decode(b"aGVsbG8=junk"), b"hello");
        assert_eq!(base64_decode(b"a"), b"");
    }
}
