//! Header rules a route sets on what crosses the proxy: fields removed,
//! replaced or added toward the application (nginx `proxy_set_header`,
//! Caddy `header_up`) and toward the client (nginx `proxy_hide_header`
//! and `add_header`, Caddy `header_down`).
//!
//! Only the names live here, checked once when a config loads; the
//! values are the caller's (templates expanded per request), handed to
//! [`FieldRules::write`] one by one. A field named by a `set` or `remove`
//! rule is never passed on from the other side: a client cannot forge a
//! field a route sets (`X-Remote-User`), even when the route's value for
//! it comes out empty.

use super::{is_field_value, is_hop_by_hop, is_token};
use crate::eq_ignore_case;

/// Which way the rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toward {
    /// The request sent to the application.
    Upstream,
    /// The response sent to the client.
    Client,
}

/// One direction's rules, names validated and lowercased.
#[derive(Debug, Clone, Default)]
pub struct FieldRules {
    /// Lowercase names whose incoming fields are not passed on: those of
    /// `set` and of `remove`.
    dropped: Vec<Box<[u8]>>,
    /// The fields the writer appends, in order (`set` ones first), as
    /// written in the config.
    written: Vec<Box<[u8]>>,
}

impl FieldRules {
    /// Compiles the names of `set`, `add` and `remove` rules. The framing
    /// and hop-by-hop fields are the proxy's own (RFC 9112 §6.1, RFC 9110
    /// §7.6.1) and refused, as is `Host` toward the application (the
    /// route's `preserve_host` decides it) and `Server` / `Date` toward
    /// the client (the server side writes them).
    pub fn new<'n>(
        toward: Toward,
        set: impl IntoIterator<Item = &'n str>,
        add: impl IntoIterator<Item = &'n str>,
        remove: impl IntoIterator<Item = &'n str>,
    ) -> Result<FieldRules, String> {
        let check = |n: &str| -> Result<Box<[u8]>, String> {
            let b = n.as_bytes();
            if !is_token(b) {
                return Err(format!("`{n}` is not a field name"));
            }
            let own = is_hop_by_hop(b)
                || eq_ignore_case(b, b"content-length")
                || match toward {
                    Toward::Upstream => eq_ignore_case(b, b"host"),
                    Toward::Client => eq_ignore_case(b, b"server") || eq_ignore_case(b, b"date"),
                };
            if own {
                return Err(format!(
                    "`{n}` is written by the proxy itself and cannot be changed by a rule"
                ));
            }
            Ok(b.to_ascii_lowercase().into_boxed_slice())
        };
        let mut rules = FieldRules::default();
        for n in set {
            rules.dropped.push(check(n)?);
            rules.written.push(n.as_bytes().into());
        }
        for n in add {
            check(n)?;
            rules.written.push(n.as_bytes().into());
        }
        for n in remove {
            rules.dropped.push(check(n)?);
        }
        rules.dropped.sort();
        rules.dropped.dedup();
        Ok(rules)
    }

    /// Whether there are no rules at all.
    pub fn is_empty(&self) -> bool {
        self.dropped.is_empty() && self.written.is_empty()
    }

    /// Whether a field named `name` coming from the other side is left
    /// out (a `set` or `remove` rule names it).
    pub fn drops(&self, name: &[u8]) -> bool {
        self.dropped.iter().any(|d| eq_ignore_case(d, name))
    }

    /// How many fields [`FieldRules::write`] asks values for.
    pub fn len(&self) -> usize {
        self.written.len()
    }

    /// Appends the rules' fields: for the `i`-th, `value(i, buf)` puts
    /// its value into `buf` (cleared before each); an empty value writes
    /// nothing (for a `set`: the field is removed). A value with CR, LF,
    /// NUL or another control character is refused (RFC 9110 §5.5):
    /// false, and nothing is appended.
    pub fn write(&self, out: &mut Vec<u8>, mut value: impl FnMut(usize, &mut Vec<u8>)) -> bool {
        let mark = out.len();
        let mut buf = Vec::new();
        for (i, name) in self.written.iter().enumerate() {
            buf.clear();
            value(i, &mut buf);
            if buf.is_empty() {
                continue;
            }
            if !is_field_value(&buf) {
                out.truncate(mark);
                return false;
            }
            super::push_field(out, name, &buf);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(set: &[&'static str], add: &[&'static str], rm: &[&'static str]) -> FieldRules {
        FieldRules::new(
            Toward::Upstream,
            set.iter().copied(),
            add.iter().copied(),
            rm.iter().copied(),
        )
        .expect("valid rules")
    }

    /// nginx `proxy_set_header X-Remote-User $remote_user`: the client's
    /// field of that name never reaches the application, whatever case it
    /// is written in.
    #[test]
    fn a_set_rule_drops_the_incoming_field_in_any_case() {
        let r = rules(&["X-Remote-User"], &["X-Extra"], &["Cookie"]);
        assert!(r.drops(b"x-remote-user"));
        assert!(r.drops(b"X-REMOTE-USER"));
        assert!(r.drops(b"cookie"));
        // `add` keeps what came and appends.
        assert!(!r.drops(b"x-extra"));
        assert_eq!(r.len(), 2);
    }

    /// nginx: "If the value of a header field is an empty string then this
    /// field will not be passed"; Caddy's `header_up -Name` removes.
    #[test]
    fn an_empty_value_writes_no_field() {
        let r = rules(&["X-User", "X-Team"], &["X-Add"], &[]);
        let mut out = Vec::new();
        assert!(r.write(&mut out, |i, b| {
            if i != 0 {
                b.extend_from_slice(b"v");
            }
        }));
        assert_eq!(out, b"X-Team: v\r\nX-Add: v\r\n");
    }

    /// RFC 9110 §5.5: a value expanded from the request (a Lua variable,
    /// say) with CR LF would inject a field of the client's making.
    #[test]
    fn a_value_with_a_line_break_is_refused_and_nothing_written() {
        let r = rules(&["X-A", "X-B"], &[], &[]);
        let mut out = b"keep".to_vec();
        let ok = r.write(&mut out, |i, b| {
            b.extend_from_slice(if i == 0 { b"ok" } else { b"x\r\nEvil: 1" })
        });
        assert!(!ok);
        assert_eq!(out, b"keep");
    }

    /// The framing (RFC 9112 §6.1) and connection fields (RFC 9110
    /// §7.6.1) are the proxy's to write, so rules cannot desynchronize
    /// the body from its length.
    #[test]
    fn framing_hop_by_hop_and_host_names_are_refused_at_load() {
        for n in [
            "Content-Length",
            "Transfer-Encoding",
            "Connection",
            "Upgrade",
            "Host",
            "bad name",
            "",
        ] {
            assert!(
                FieldRules::new(Toward::Upstream, [n], [], []).is_err(),
                "{n}"
            );
        }
        assert!(FieldRules::new(Toward::Client, ["Server"], [], []).is_err());
        assert!(FieldRules::new(Toward::Client, [], [], ["Date"]).is_err());
        assert!(FieldRules::new(Toward::Client, ["Host"], [], []).is_ok());
    }
}
