//! The `headers`, `expires` and `cache_control` filter: response header
//! fields set, added and removed per site or route, for every handler's
//! responses (nginx `add_header` / `expires`, Caddy `header`).
//!
//! The configuration is checked once, at load, into [`HeaderRules`]: the
//! names that go and the fields that are appended. It is a head-only
//! response filter ([`Filter`]): the exchange hands it every response's
//! complete head, as the lines every carrier writes ([`Fields`]), so the
//! same code serves HTTP/1 and HTTP/2 and every handler. Fields that frame
//! the message or belong to one connection cannot be named: a rule must
//! not be able to make a response unreadable.

use super::{Fields, Filter, Head, Never};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `headers = { set = {...}, add = {...}, remove = [...], always = false }`
/// as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeadersTable {
    /// Fields that replace any of the same name the handler wrote
    /// (Caddy `header Name value`).
    #[serde(default)]
    pub set: BTreeMap<String, Values>,
    /// Fields added beside any of the same name (nginx `add_header`,
    /// Caddy `header +Name value`).
    #[serde(default)]
    pub add: BTreeMap<String, Values>,
    /// Fields taken out (Caddy `header -Name`).
    #[serde(default)]
    pub remove: Vec<String>,
    /// Also on responses other than 2xx and 3xx (nginx `always`).
    #[serde(default)]
    pub always: bool,
}

/// One value, or several (each its own field line).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Values {
    One(String),
    Many(Vec<String>),
}

impl Values {
    fn as_slice(&self) -> &[String] {
        match self {
            Values::One(v) => std::slice::from_ref(v),
            Values::Many(v) => v,
        }
    }
}

/// Fields no rule may set, add or remove: the message's framing and its
/// coding (RFC 9112 §6), what belongs to one connection (RFC 9110 §7.6.1),
/// and the Date an origin server with a clock must send (RFC 9110
/// §6.6.1). The server writes these itself.
const RESERVED: [&str; 10] = [
    "content-length",
    "transfer-encoding",
    "content-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "date",
];

/// `expires`, as nginx's directive of that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expires {
    /// `Expires` this long after the response, `Cache-Control:
    /// max-age=N`.
    After(Duration),
    /// A negative time: `Expires` that long before the response,
    /// `Cache-Control: no-cache`.
    Before(Duration),
    /// `epoch`: `Expires: Thu, 01 Jan 1970 00:00:01 GMT`,
    /// `Cache-Control: no-cache`.
    Epoch,
    /// `max`: `Expires: Thu, 31 Dec 2037 23:55:55 GMT`, `Cache-Control:
    /// max-age=315360000` (ten years), nginx's values.
    Max,
}

/// A field a rule appends: its name and value.
type Line = (Box<str>, Box<[u8]>);

/// What the three keys of a site or route say, checked: `None` from
/// [`HeaderRules::build`] when they say nothing, so responses that have
/// no rules pay nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeaderRules {
    /// Names whose fields the handler wrote go (`remove`, `set`).
    drop: Box<[Box<str>]>,
    /// `set` and `add` fields, appended in this order.
    lines: Box<[Line]>,
    expires: Option<Expires>,
    /// `cache_control`, or what `expires` implies.
    cache_control: Option<Box<[u8]>>,
    always: bool,
}

impl HeaderRules {
    /// Checks `headers`, `expires` and `cache_control` of one site or
    /// route (each the route's if it has it, else the site's) into rules;
    /// `None` when there are none. An error says which of the three keys
    /// it is about, and what is wrong.
    pub(crate) fn build(
        headers: Option<&HeadersTable>,
        expires: Option<&str>,
        cache_control: Option<&str>,
    ) -> Result<Option<HeaderRules>, (&'static str, String)> {
        let expires = match expires {
            Some(e) => parse_expires(e).map_err(|m| ("expires", m))?,
            None => None,
        };
        let cache_control = match cache_control {
            Some(v) => {
                check_value(v).map_err(|m| ("cache_control", m))?;
                Some(v.as_bytes().into())
            }
            None => expires.map(|e| match e {
                Expires::After(d) => format!("max-age={}", d.as_secs()).into_bytes().into(),
                Expires::Max => b"max-age=315360000"[..].into(),
                Expires::Before(_) | Expires::Epoch => b"no-cache"[..].into(),
            }),
        };
        let empty = HeadersTable::default();
        let h = headers.unwrap_or(&empty);
        if h.set.is_empty()
            && h.add.is_empty()
            && h.remove.is_empty()
            && expires.is_none()
            && cache_control.is_none()
        {
            return Ok(None);
        }
        let err = |m: String| ("headers", m);
        let mut drop: Vec<Box<str>> = Vec::new();
        let mut lines = Vec::new();
        for name in &h.remove {
            check_name(name).map_err(|m| err(format!("remove: {m}")))?;
            drop.push(name.as_str().into());
        }
        for (key, map, replaces) in [("set", &h.set, true), ("add", &h.add, false)] {
            for (name, values) in map {
                check_name(name).map_err(|m| err(format!("{key}: {m}")))?;
                if h.remove.iter().any(|r| r.eq_ignore_ascii_case(name)) {
                    return Err(err(format!("{key}: `{name}` is also in `remove`")));
                }
                if replaces && h.add.keys().any(|a| a.eq_ignore_ascii_case(name)) {
                    return Err(err(format!(
                        "set: `{name}` is also in `add` (set replaces, add adds: give all its \
                         values to one of them)"
                    )));
                }
                if values.as_slice().is_empty() {
                    return Err(err(format!("{key}: {name}: no value")));
                }
                for v in values.as_slice() {
                    check_value(v).map_err(|m| err(format!("{key}: {name}: {m}")))?;
                    lines.push((name.as_str().into(), v.as_bytes().into()));
                }
                if replaces {
                    drop.push(name.as_str().into());
                }
            }
        }
        let dup = |field: &str| {
            h.set
                .keys()
                .chain(h.add.keys())
                .chain(h.remove.iter())
                .find(|n| n.eq_ignore_ascii_case(field))
        };
        if cache_control.is_some() {
            if let Some(n) = dup("cache-control") {
                return Err(err(format!(
                    "`{n}` and cache_control/expires both say Cache-Control: keep one"
                )));
            }
        }
        if expires.is_some() {
            if let Some(n) = dup("expires") {
                return Err(err(format!("`{n}` and expires both say Expires: keep one")));
            }
        }
        Ok(Some(HeaderRules {
            drop: drop.into(),
            lines: lines.into(),
            expires,
            cache_control,
            always: h.always,
        }))
    }

    /// Whether the rules touch a response with this status: 2xx and 3xx,
    /// or all with `always` (nginx applies `add_header` and `expires` to
    /// 200, 201, 204, 206, 301, 302, 303, 304, 307 and 308 unless told
    /// `always`; here the two classes whole).
    #[inline]
    pub(crate) fn applies(&self, status: u16) -> bool {
        self.always || (200..400).contains(&status)
    }

    /// Edits the header fields of a response with `status`, sent at
    /// `now`: fields named by `remove`, `set`, `expires` and
    /// `cache_control` go, then the rules' fields are appended.
    /// `expires` and `cache_control` are for 2xx and 3xx only, whatever
    /// `always` says: an error is not to be cached for a month.
    pub(crate) fn edit(&self, fields: &mut Fields<'_>, status: u16, now: SystemTime) {
        if !self.applies(status) {
            return;
        }
        for name in self.drop.iter() {
            fields.remove(name);
        }
        for (name, value) in self.lines.iter() {
            fields.append(name, value);
        }
        if !(200..400).contains(&status) {
            return;
        }
        if let Some(e) = self.expires {
            let at = match e {
                Expires::After(d) => now + d,
                Expires::Before(d) => now.checked_sub(d).unwrap_or(UNIX_EPOCH),
                Expires::Epoch => UNIX_EPOCH + Duration::from_secs(1),
                // Thu, 31 Dec 2037 23:55:55 GMT
                Expires::Max => UNIX_EPOCH + Duration::from_secs(2_145_916_555),
            };
            fields.set("Expires", httpdate::fmt_http_date(at).as_bytes());
        }
        if let Some(v) = &self.cache_control {
            fields.set("Cache-Control", v);
        }
    }
}

impl Filter for HeaderRules {
    type Body = Never;
    /// An included response's fields are thrown away with its head; an
    /// error page's response is the main one, which is edited.
    const IN_SUBREQUESTS: bool = false;

    fn head(&self, h: &mut Head<'_>) -> Option<Never> {
        self.edit(&mut h.fields, h.status, SystemTime::now());
        None
    }
}

/// nginx's `expires` values: a time (`30d`, `12h`, `1h30m`, `-1`: a
/// number alone is seconds), `epoch`, `max`, or `off` (none: a route
/// lifts its site's). Units: s, m, h, d, w, M (30 days), y (365 days).
fn parse_expires(s: &str) -> Result<Option<Expires>, String> {
    let t = s.trim();
    match t {
        "off" => return Ok(None),
        "epoch" => return Ok(Some(Expires::Epoch)),
        "max" => return Ok(Some(Expires::Max)),
        _ => {}
    }
    let (neg, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let d = parse_time(t).ok_or_else(|| {
        format!(
            "`{s}` is not a time (write e.g. \"30d\", \"12h\", \"1h30m\", \"epoch\", \"max\" or \"off\")"
        )
    })?;
    Ok(Some(if neg {
        Expires::Before(d)
    } else {
        Expires::After(d)
    }))
}

/// `1y2M3w4d5h6m7s` in any subset and order of units nginx knows, each
/// once; a bare number is seconds. Capped at ten years (nginx's `max`).
fn parse_time(t: &str) -> Option<Duration> {
    if t.is_empty() {
        return None;
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse()
            .ok()
            .filter(|&n| n <= 315_360_000)
            .map(Duration::from_secs);
    }
    let mut total: u64 = 0;
    let mut seen = String::new();
    let mut num: Option<u64> = None;
    for c in t.chars() {
        if let Some(d) = c.to_digit(10) {
            num = Some(
                num.unwrap_or(0)
                    .checked_mul(10)?
                    .checked_add(u64::from(d))?,
            );
            continue;
        }
        let mul: u64 = match c {
            'y' => 365 * 86400,
            'M' => 30 * 86400,
            'w' => 7 * 86400,
            'd' => 86400,
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return None,
        };
        if seen.contains(c) {
            return None;
        }
        seen.push(c);
        total = total.checked_add(num.take()?.checked_mul(mul)?)?;
    }
    if num.is_some() || total > 315_360_000 {
        return None;
    }
    Some(Duration::from_secs(total))
}

/// A field name is a token (RFC 9110 §5.1, §5.6.2), and not one the
/// server keeps to itself.
fn check_name(name: &str) -> Result<(), String> {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(tchar) {
        return Err(format!("`{name}` is not a field name (RFC 9110 §5.1)"));
    }
    if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(name)) {
        return Err(format!(
            "`{name}` is the server's to write (framing, coding, connection or Date)"
        ));
    }
    Ok(())
}

/// A field value: visible characters, spaces and tabs inside, none at
/// either end, no control characters (RFC 9110 §5.5: CR, LF and NUL
/// would split the head).
fn check_value(v: &str) -> Result<(), String> {
    let b = v.as_bytes();
    let ok = |c: u8| c == b'\t' || c == b' ' || (0x21..=0x7e).contains(&c) || c >= 0x80;
    if !b.iter().all(|&c| ok(c)) {
        return Err(format!("{v:?} has a control character (RFC 9110 §5.5)"));
    }
    if b.first().is_some_and(|c| *c == b' ' || *c == b'\t')
        || b.last().is_some_and(|c| *c == b' ' || *c == b'\t')
    {
        return Err(format!(
            "{v:?} starts or ends with white space (RFC 9110 §5.5)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(toml_text: &str) -> HeadersTable {
        #[derive(Deserialize)]
        struct W {
            headers: HeadersTable,
        }
        toml::from_str::<W>(toml_text)
            .expect("a headers table")
            .headers
    }

    fn rules(h: &str, expires: Option<&str>, cc: Option<&str>) -> HeaderRules {
        let t = table(h);
        HeaderRules::build(Some(&t), expires, cc)
            .expect("valid rules")
            .expect("some rules")
    }

    const BASE: &[u8] = b"HTTP/1.1 200 OK\r\nDate: Thu, 26 Nov 2026 16:00:00 GMT\r\n\
        Server: stoa\r\nContent-Type: text/html\r\nX-Old: 1\r\nx-old: 2\r\n";
    const FROM: usize = 17;

    fn edit(r: &HeaderRules, head: &mut Vec<u8>, status: u16, now: SystemTime) {
        r.edit(&mut Fields::new(head, FROM), status, now);
    }

    fn edited(r: &HeaderRules, status: u16) -> String {
        let mut head = BASE.to_vec();
        edit(
            r,
            &mut head,
            status,
            UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        );
        String::from_utf8(head).expect("ascii")
    }

    #[test]
    fn set_replaces_every_field_of_its_name_add_adds_and_remove_removes() {
        let r = rules(
            "headers = { set = { X-Old = \"new\" }, add = { Link = [\"<a>\", \"<b>\"] }, \
             remove = [\"server\"] }",
            None,
            None,
        );
        assert_eq!(
            edited(&r, 200),
            "HTTP/1.1 200 OK\r\nDate: Thu, 26 Nov 2026 16:00:00 GMT\r\n\
             Content-Type: text/html\r\nX-Old: new\r\nLink: <a>\r\nLink: <b>\r\n"
        );
    }

    #[test]
    fn without_always_errors_are_left_as_they_are_with_it_they_are_edited_as_nginx_add_header() {
        let plain = rules("headers = { add = { X-A = \"1\" } }", None, None);
        for s in [200, 204, 206, 301, 304, 308] {
            assert!(edited(&plain, s).ends_with("X-A: 1\r\n"), "{s}");
        }
        for s in [400, 404, 500, 503] {
            assert_eq!(edited(&plain, s).as_bytes(), BASE, "{s}");
        }
        let always = rules(
            "headers = { add = { X-A = \"1\" }, always = true }",
            None,
            None,
        );
        assert!(edited(&always, 404).ends_with("X-A: 1\r\n"));
    }

    #[test]
    fn expires_sets_expires_and_max_age_as_nginx_expires() {
        let r = rules("headers = {}", Some("30d"), None);
        assert_eq!(
            edited(&r, 200),
            format!(
                "{}Expires: Thu, 14 Dec 2023 22:13:20 GMT\r\nCache-Control: max-age=2592000\r\n",
                std::str::from_utf8(BASE).unwrap()
            )
        );
        let r = rules("headers = {}", Some("epoch"), None);
        assert!(edited(&r, 200)
            .ends_with("Expires: Thu, 01 Jan 1970 00:00:01 GMT\r\nCache-Control: no-cache\r\n"));
        let r = rules("headers = {}", Some("max"), None);
        assert!(edited(&r, 200).ends_with(
            "Expires: Thu, 31 Dec 2037 23:55:55 GMT\r\nCache-Control: max-age=315360000\r\n"
        ));
        // A negative time: in the past, and no-cache.
        let r = rules("headers = {}", Some("-1h"), None);
        assert!(edited(&r, 200)
            .ends_with("Expires: Tue, 14 Nov 2023 21:13:20 GMT\r\nCache-Control: no-cache\r\n"));
    }

    #[test]
    fn expires_and_cache_control_replace_the_handlers_own_and_leave_errors_alone_even_always() {
        let r = rules(
            "headers = { always = true, add = { X-A = \"1\" } }",
            Some("1h30m"),
            Some("public, max-age=60"),
        );
        let mut head = b"HTTP/1.1 200 OK\r\nCache-Control: private\r\nExpires: 0\r\n".to_vec();
        edit(&r, &mut head, 200, UNIX_EPOCH);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "HTTP/1.1 200 OK\r\nX-A: 1\r\nExpires: Thu, 01 Jan 1970 01:30:00 GMT\r\n\
             Cache-Control: public, max-age=60\r\n"
        );
        let mut head = b"HTTP/1.1 503 x\r\nCache-Control: no-store\r\n".to_vec();
        edit(&r, &mut head, 503, UNIX_EPOCH);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "HTTP/1.1 503 x\r\nCache-Control: no-store\r\nX-A: 1\r\n"
        );
    }

    #[test]
    fn nothing_configured_builds_no_rules() {
        assert_eq!(HeaderRules::build(None, None, None), Ok(None));
        assert_eq!(
            HeaderRules::build(Some(&table("headers = {}")), None, None),
            Ok(None)
        );
        // `off` on a route lifts the site's.
        assert_eq!(HeaderRules::build(None, Some("off"), None), Ok(None));
    }

    #[test]
    fn framing_hop_by_hop_and_date_fields_cannot_be_named() {
        for name in [
            "Content-Length",
            "transfer-encoding",
            "Connection",
            "Keep-Alive",
            "TE",
            "Trailer",
            "Upgrade",
            "Proxy-Connection",
            "Content-Encoding",
            "Date",
        ] {
            for key in ["set", "add"] {
                let t = table(&format!("headers = {{ {key} = {{ {name} = \"x\" }} }}"));
                let (k, e) = HeaderRules::build(Some(&t), None, None).unwrap_err();
                assert_eq!(k, "headers");
                assert!(e.starts_with(&format!("{key}: `{name}`")), "{e}");
            }
            let t = table(&format!("headers = {{ remove = [\"{name}\"] }}"));
            assert!(HeaderRules::build(Some(&t), None, None).is_err(), "{name}");
        }
    }

    #[test]
    fn names_must_be_tokens_and_values_field_values_rfc_9110_5() {
        for bad in ["X Y", "X:Y", "", "Ü", "X\r\nY"] {
            let mut t = HeadersTable::default();
            t.set.insert(bad.into(), Values::One("v".into()));
            assert!(HeaderRules::build(Some(&t), None, None).is_err(), "{bad:?}");
        }
        for bad in [
            "a\r\nX-Injected: 1",
            "a\nb",
            "nul\0",
            " lead",
            "trail\t",
            "bell\x07",
        ] {
            let mut t = HeadersTable::default();
            t.add.insert("X-A".into(), Values::One(bad.into()));
            let (k, e) = HeaderRules::build(Some(&t), None, None).unwrap_err();
            assert_eq!(k, "headers");
            assert!(e.starts_with("add: X-A: "), "{e}");
            let (k, _) = HeaderRules::build(None, None, Some(bad)).unwrap_err();
            assert_eq!(k, "cache_control", "{bad:?}");
        }
        let mut t = HeadersTable::default();
        t.add
            .insert("X-A".into(), Values::One("in side\tok é".into()));
        assert!(HeaderRules::build(Some(&t), None, None).is_ok());
    }

    #[test]
    fn a_field_named_by_two_rules_is_refused() {
        for (h, e, cc) in [
            (
                "headers = { set = { X = \"1\" }, remove = [\"x\"] }",
                None,
                None,
            ),
            (
                "headers = { set = { X = \"1\" }, add = { x = \"2\" } }",
                None,
                None,
            ),
            (
                "headers = { set = { Cache-Control = \"1\" } }",
                None,
                Some("no-store"),
            ),
            ("headers = { add = { Expires = \"0\" } }", Some("1d"), None),
            (
                "headers = { remove = [\"Cache-Control\"] }",
                Some("1d"),
                None,
            ),
        ] {
            assert!(HeaderRules::build(Some(&table(h)), e, cc).is_err(), "{h}");
        }
    }

    #[test]
    fn expires_takes_nginx_times_and_refuses_others() {
        let s = |t: &str| parse_expires(t).unwrap();
        assert_eq!(
            s("30d"),
            Some(Expires::After(Duration::from_secs(30 * 86400)))
        );
        assert_eq!(s("3600"), Some(Expires::After(Duration::from_secs(3600))));
        assert_eq!(
            s("1y"),
            Some(Expires::After(Duration::from_secs(365 * 86400)))
        );
        assert_eq!(
            s("2M"),
            Some(Expires::After(Duration::from_secs(60 * 86400)))
        );
        assert_eq!(
            s("1w2d"),
            Some(Expires::After(Duration::from_secs(9 * 86400)))
        );
        assert_eq!(s("+90m"), Some(Expires::After(Duration::from_secs(5400))));
        assert_eq!(s("-1"), Some(Expires::Before(Duration::from_secs(1))));
        assert_eq!(s("0"), Some(Expires::After(Duration::ZERO)));
        for bad in [
            "", "d", "30x", "1h1h", "30 days", "11y", "1.5h", "h30", "--1",
        ] {
            assert!(parse_expires(bad).is_err(), "{bad:?}");
        }
    }
}
