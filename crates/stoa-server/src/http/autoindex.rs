//! Directory listings ("autoindex"): a small, valid HTML5 page.
//!
//! File names come from the file system, so they are untrusted: they are
//! HTML-escaped in text and percent-encoded in hrefs, which also keeps a
//! name like "javascript:x" or "a:b" from being read as a URI scheme.

use std::fmt::Write as _;

use super::path;

/// One directory entry, as the handler read it from the file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub is_dir: bool,
    pub size: u64,
    /// Modification time, seconds since the Unix epoch.
    pub modified: u64,
}

/// Renders the listing of `url_path` (decoded, ending in '/').
///
/// Sorts `entries` in place (directories first, then by name, byte-wise) —
/// the caller owns the buffer, so no copy is made. Entries named "." or
/// ".." are skipped; the page has its own "../" link unless `url_path` is
/// "/". Dates are UTC, as "YYYY-MM-DD HH:MM".
pub fn render(url_path: &str, entries: &mut [Entry]) -> String {
    entries.sort_unstable_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));

    let names: usize = entries.iter().map(|e| e.name.len()).sum();
    let mut out = String::with_capacity(640 + 2 * url_path.len() + 4 * names + 96 * entries.len());
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>Index of ",
    );
    escape_into(url_path, &mut out);
    out.push_str(
        "</title>\n<style>body{font-family:sans-serif;margin:2em}\
         table{border-collapse:collapse}th,td{padding:.2em 1em;text-align:left}\
         td.s{text-align:right}</style>\n</head>\n<body>\n<h1>Index of ",
    );
    escape_into(url_path, &mut out);
    out.push_str(
        "</h1>\n<table>\n<thead><tr><th>Name</th><th>Size</th><th>Modified</th></tr></thead>\n\
         <tbody>\n",
    );
    if url_path != "/" {
        out.push_str("<tr><td><a href=\"../\">../</a></td><td class=\"s\">-</td><td></td></tr>\n");
    }
    for e in entries.iter() {
        if e.name == "." || e.name == ".." {
            continue;
        }
        let slash = if e.is_dir { "/" } else { "" };
        out.push_str("<tr><td><a href=\"");
        // Percent-encoded output is only unreserved chars, '/' and '%',
        // so it needs no further escaping inside the attribute.
        path::encode_into(&e.name, &mut out);
        out.push_str(slash);
        out.push_str("\">");
        escape_into(&e.name, &mut out);
        out.push_str(slash);
        out.push_str("</a></td><td class=\"s\">");
        if e.is_dir {
            out.push('-');
        } else {
            write_size(e.size, &mut out);
        }
        out.push_str("</td><td>");
        write_date(e.modified, &mut out);
        out.push_str("</td></tr>\n");
    }
    out.push_str("</tbody>\n</table>\n</body>\n</html>\n");
    out
}

/// Escapes `& < > " '` so `s` is safe in HTML text and in a quoted
/// attribute value (either quote).
#[cfg(test)]
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    escape_into(s, &mut out);
    out
}

/// [`html_escape`], appending to an existing buffer.
pub fn escape_into(s: &str, out: &mut String) {
    let mut last = 0;
    for (i, b) in s.bytes().enumerate() {
        let rep = match b {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            b'\'' => "&#39;",
            _ => continue,
        };
        // `i` is on a char boundary: the byte is ASCII.
        out.push_str(&s[last..i]);
        out.push_str(rep);
        last = i + 1;
    }
    out.push_str(&s[last..]);
}

/// A size for people: "512 B", "1.5 KiB", "2.0 GiB" (binary units, one
/// decimal, rounded half up).
fn write_size(n: u64, out: &mut String) {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        let _ = write!(out, "{n} B");
        return;
    }
    // Integer tenths avoid float formatting, and u128 avoids overflow near
    // u64::MAX. Rounding can carry into the next unit (1023.96 KiB ->
    // "1.0 MiB"), hence the loop rather than picking the unit up front.
    let n = u128::from(n);
    let mut unit = 0;
    let mut div: u128 = 1024;
    loop {
        let tenths = (n * 10 + div / 2) / div;
        if tenths < 10240 || unit == UNITS.len() - 1 {
            // Writing to a String cannot fail.
            let _ = write!(out, "{}.{} {}", tenths / 10, tenths % 10, UNITS[unit]);
            return;
        }
        unit += 1;
        div *= 1024;
    }
}

/// "YYYY-MM-DD HH:MM" in UTC.
fn write_date(secs: u64, out: &mut String) {
    let (y, m, d) = civil_from_days(secs / 86400);
    let rem = secs % 86400;
    let _ = write!(
        out,
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    );
}

/// Proleptic Gregorian (year, month, day) of a day count since 1970-01-01.
///
/// Howard Hinnant's `civil_from_days`
/// (<https://howardhinnant.github.io/date_algorithms.html>), restricted to
/// non-negative days so it can stay in unsigned arithmetic. It shifts the
/// year to start on 1 March so the leap day is the last day of the year,
/// then counts 400-year eras of 146097 days.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // 719468 days from 0000-03-01 to 1970-01-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
    let d = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, size: u64, modified: u64) -> Entry {
        Entry {
            name: name.to_owned(),
            is_dir: false,
            size,
            modified,
        }
    }

    fn dir(name: &str) -> Entry {
        Entry {
            name: name.to_owned(),
            is_dir: true,
            size: 4096,
            modified: 0,
        }
    }

    fn size(n: u64) -> String {
        let mut s = String::new();
        write_size(n, &mut s);
        s
    }

    fn date(secs: u64) -> String {
        let mut s = String::new();
        write_date(secs, &mut s);
        s
    }

    #[test]
    fn html_escape_covers_the_five_specials() {
        assert_eq!(
            html_escape("a&b<c>d\"e'f"),
            "a&amp;b&lt;c&gt;d&quot;e&#39;f"
        );
        assert_eq!(html_escape(""), "");
        assert_eq!(html_escape("plain"), "plain");
        assert_eq!(html_escape("&&"), "&amp;&amp;");
        assert_eq!(html_escape("caf\u{e9}<"), "caf\u{e9}&lt;");
        assert_eq!(html_escape("&amp;"), "&amp;amp;");
    }

    #[test]
    fn sizes_are_human_readable() {
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(1024), "1.0 KiB");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(10 * 1024 * 1024), "10.0 MiB");
        assert_eq!(size(5 * 1024 * 1024 * 1024), "5.0 GiB");
        // Rounding carries into the next unit instead of "1024.0 KiB".
        assert_eq!(size(1024 * 1024 - 1), "1.0 MiB");
        assert_eq!(size(1024 * 1024 - 52), "1023.9 KiB");
        assert_eq!(size(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn dates_are_utc_civil_time() {
        assert_eq!(date(0), "1970-01-01 00:00");
        assert_eq!(date(59), "1970-01-01 00:00");
        assert_eq!(date(1_795_341_780), "2026-11-22 10:03");
        assert_eq!(date(946_684_740), "1999-12-31 23:59");
        assert_eq!(date(951_868_740), "2000-02-29 23:59");
        assert_eq!(date(1_709_208_000), "2024-02-29 12:00");
        // 2100 is not a leap year: Feb 28 is followed by Mar 1.
        assert_eq!(date(4_107_542_400), "2100-03-01 00:00");
        assert_eq!(date(4_107_542_400 - 86_400), "2100-02-28 00:00");
        assert_eq!(date(253_402_300_740), "9999-12-31 23:59");
    }

    #[test]
    fn civil_from_days_matches_a_day_by_day_walk() {
        // Walk 1970-01-01 .. 2400-12-31 one day at a time with the plain
        // Gregorian rules and compare.
        let leap = |y: u64| matches!((y % 4, y % 100, y % 400), (0, 1.., _) | (_, _, 0));
        let (mut y, mut m, mut d) = (1970, 1, 1);
        for days in 0..157_000u64 {
            assert_eq!(civil_from_days(days), (y, m, d), "day {days}");
            let month_len = match m {
                2 if leap(y) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            d += 1;
            if d > month_len {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    }

    #[test]
    fn far_future_dates_do_not_overflow() {
        // Checked against Python's datetime plus whole 400-year cycles.
        assert_eq!(date(u64::MAX), "584554051223-11-09 07:00");
    }

    #[test]
    fn page_is_a_complete_html5_document() {
        let page = render("/docs/", &mut []);
        assert!(page.starts_with("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"));
        assert!(page.contains("<meta charset=\"utf-8\">"));
        assert!(page.contains("<title>Index of /docs/</title>"));
        assert!(page.contains("<h1>Index of /docs/</h1>"));
        assert!(page.ends_with("</tbody>\n</table>\n</body>\n</html>\n"));
    }

    #[test]
    fn parent_link_except_at_the_root() {
        assert!(render("/a/", &mut []).contains("<a href=\"../\">../</a>"));
        assert!(!render("/", &mut []).contains("../"));
    }

    #[test]
    fn directories_first_then_by_name() {
        let mut entries = vec![
            file("b.txt", 1, 0),
            dir("zdir"),
            file("a.txt", 1, 0),
            dir("adir"),
        ];
        let page = render("/", &mut entries);
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["adir", "zdir", "a.txt", "b.txt"]);
        let pos = |s: &str| page.find(s).unwrap_or_else(|| panic!("{s} missing"));
        assert!(pos(">adir/<") < pos(">zdir/<"));
        assert!(pos(">zdir/<") < pos(">a.txt<"));
        assert!(pos(">a.txt<") < pos(">b.txt<"));
    }

    #[test]
    fn directories_link_with_a_trailing_slash() {
        let page = render("/", &mut [dir("sub dir")]);
        assert!(
            page.contains("<a href=\"sub%20dir/\">sub dir/</a>"),
            "{page}"
        );
        assert!(page.contains("<td class=\"s\">-</td>"));
    }

    #[test]
    fn files_show_size_and_date() {
        let page = render("/", &mut [file("f.bin", 1536, 1_795_341_780)]);
        assert!(page.contains(
            "<tr><td><a href=\"f.bin\">f.bin</a></td><td class=\"s\">1.5 KiB</td>\
             <td>2026-11-22 10:03</td></tr>"
        ));
    }

    #[test]
    fn hostile_names_are_escaped_and_encoded() {
        let name = "<script>alert('x')</script>&\"";
        let page = render("/", &mut [file(name, 0, 0)]);
        assert!(!page.contains("<script>"));
        assert!(page.contains(
            "<a href=\"%3Cscript%3Ealert%28%27x%27%29%3C/script%3E%26%22\">\
             &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;</a>"
        ));
    }

    #[test]
    fn rfc3986_4_2_names_with_colons_are_not_schemes() {
        let page = render("/", &mut [file("javascript:alert(1)", 0, 0)]);
        assert!(
            page.contains("href=\"javascript%3Aalert%281%29\""),
            "{page}"
        );
    }

    #[test]
    fn hrefs_encode_special_and_non_ascii_names() {
        let page = render(
            "/",
            &mut [file("100% #1?.txt", 0, 0), file("caf\u{e9}", 0, 0)],
        );
        assert!(page.contains("href=\"100%25%20%231%3F.txt\""), "{page}");
        assert!(page.contains("href=\"caf%C3%A9\">caf\u{e9}</a>"), "{page}");
    }

    #[test]
    fn the_path_in_title_and_heading_is_escaped() {
        let page = render("/<b>&/", &mut []);
        assert!(page.contains("<title>Index of /&lt;b&gt;&amp;/</title>"));
        assert!(page.contains("<h1>Index of /&lt;b&gt;&amp;/</h1>"));
    }

    #[test]
    fn dot_entries_are_skipped() {
        let page = render("/a/", &mut [dir("."), dir(".."), file(".hidden", 1, 0)]);
        assert_eq!(page.matches("href=").count(), 2, "{page}");
        assert!(page.contains("href=\".hidden\""));
    }
}
