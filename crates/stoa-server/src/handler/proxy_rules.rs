//! A proxy route's header rules: `header_up` toward the application and
//! `header_down` toward the client, each `{ set, add, remove }` (nginx
//! `proxy_set_header`, `proxy_hide_header`, `add_header`; Caddy
//! `header_up`, `header_down`).
//!
//! Names are checked and values parsed as templates once, when the config
//! loads (the redirect handler's variables, plus `$remote_user` and
//! `$auth_NAME` from the access phase). Per request the values are
//! expanded once, before the first try, and the sans-IO writer
//! (`stoa_h1::proxy::FieldRules`) drops the fields the rules own and
//! appends theirs. A route without rules pays one `Option` check.

use super::template::{Template, Vars};
use crate::exchange::Exchange;
use std::collections::BTreeMap;
use stoa_h1::proxy::{FieldRules, Toward};

/// `header_up = {...}` / `header_down = {...}`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderRulesConfig {
    /// Fields replaced: the other side's of that name are removed first;
    /// a value that comes out empty leaves the field out altogether.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// Fields appended beside the other side's of that name.
    #[serde(default)]
    pub add: BTreeMap<String, String>,
    /// Fields removed (toward the client: nginx `proxy_hide_header`).
    #[serde(default)]
    pub remove: Vec<String>,
}

/// One direction's rules, compiled.
#[derive(Debug)]
pub(crate) struct HeaderRules {
    names: FieldRules,
    /// One per field [`FieldRules::write`] asks for: `set` then `add`,
    /// each in name order (the order `FieldRules::new` was given).
    values: Vec<Template>,
    /// The route's regex, when a value reads its captures.
    regex: Option<regex::Regex>,
    /// A value reads the client's certificate (`$ssl_client_*`): only
    /// then is it read per request.
    client_cert: bool,
}

impl HeaderRules {
    /// Compiles `cfg`; `None` when it has no rules.
    pub(crate) fn compile(
        cfg: &HeaderRulesConfig,
        toward: Toward,
        regex: Option<&regex::Regex>,
    ) -> Result<Option<HeaderRules>, String> {
        let names = FieldRules::new(
            toward,
            cfg.set.keys().map(String::as_str),
            cfg.add.keys().map(String::as_str),
            cfg.remove.iter().map(String::as_str),
        )?;
        if names.is_empty() {
            return Ok(None);
        }
        let groups = regex.map_or(0, |r| r.captures_len() - 1);
        let values = cfg
            .set
            .iter()
            .chain(&cfg.add)
            .map(|(n, v)| Template::parse_header(v, groups).map_err(|e| format!("{n}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let regex = values
            .iter()
            .any(Template::uses_captures)
            .then(|| regex.cloned())
            .flatten();
        let client_cert = values.iter().any(Template::uses_client_cert);
        Ok(Some(HeaderRules {
            names,
            values,
            regex,
            client_cert,
        }))
    }

    /// The values for one request. A value that cannot be made (`$host`
    /// without a plain Host) is empty: the field is left out.
    fn expand(&self, v: &Vars<'_>) -> Vec<Vec<u8>> {
        self.values
            .iter()
            .map(|t| t.expand(v).unwrap_or_default())
            .collect()
    }
}

/// Both directions' values for one request, expanded once before the
/// first try (a retry sends the same fields).
#[derive(Default)]
pub(crate) struct Expanded<'r> {
    up: Option<(&'r FieldRules, Vec<Vec<u8>>)>,
    down: Option<(&'r FieldRules, Vec<Vec<u8>>)>,
}

impl<'r> Expanded<'r> {
    /// Expands `up` and `down` for the request on `ex`, routed by the
    /// normalized path `norm`, with what the access phase `granted`.
    pub(crate) fn new(
        up: Option<&'r HeaderRules>,
        down: Option<&'r HeaderRules>,
        ex: &Exchange<'_>,
        norm: &str,
        granted: &[(String, Vec<u8>)],
    ) -> Expanded<'r> {
        if up.is_none() && down.is_none() {
            return Expanded::default();
        }
        let req = ex.req();
        let client_cert =
            if up.is_some_and(|r| r.client_cert) || down.is_some_and(|r| r.client_cert) {
                ex.client_cert()
            } else {
                None
            };
        let one = |r: &'r HeaderRules| {
            let v = Vars {
                scheme: ex.scheme(),
                host: req.host(),
                uri: norm,
                query: req.query(),
                request_uri: req.original_target(),
                captures: r.regex.as_ref().and_then(|re| re.captures(norm)),
                granted,
                client_cert: client_cert.as_deref(),
            };
            (&r.names, r.expand(&v))
        };
        Expanded {
            up: up.map(one),
            down: down.map(one),
        }
    }

    /// For `ForwardOptions::rules`.
    pub(crate) fn up(&self) -> Option<(&FieldRules, &[Vec<u8>])> {
        self.up.as_ref().map(|(r, v)| (*r, v.as_slice()))
    }

    /// For `ResponseOptions::rules`.
    pub(crate) fn down(&self) -> Option<(&FieldRules, &[Vec<u8>])> {
        self.down.as_ref().map(|(r, v)| (*r, v.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(set: &[(&str, &str)], add: &[(&str, &str)], remove: &[&str]) -> HeaderRulesConfig {
        let map = |kv: &[(&str, &str)]| {
            kv.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        HeaderRulesConfig {
            set: map(set),
            add: map(add),
            remove: remove.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// Rules are checked when the config loads, as nginx refuses an
    /// unknown variable in `proxy_set_header` at `nginx -t`.
    #[test]
    fn rules_are_compiled_at_load_and_mistakes_refused_there() {
        let none = HeaderRules::compile(&cfg(&[], &[], &[]), Toward::Upstream, None).unwrap();
        assert!(none.is_none(), "no rules: nothing to do per request");
        let ok = HeaderRules::compile(
            &cfg(
                &[("X-Remote-User", "$remote_user")],
                &[("X-Team", "${auth_team}")],
                &["Cookie"],
            ),
            Toward::Upstream,
            None,
        )
        .unwrap()
        .expect("rules");
        assert_eq!(ok.values.len(), 2);
        for (bad, why) in [
            (cfg(&[("X-A", "$nope")], &[], &[]), "unknown variable"),
            (cfg(&[("X-A", "$1")], &[], &[]), "capture"),
            (cfg(&[("Host", "x")], &[], &[]), "written by the proxy"),
            (cfg(&[], &[], &["Content-Length"]), "written by the proxy"),
            (cfg(&[], &[("bad name", "x")], &[]), "not a field name"),
        ] {
            let e = HeaderRules::compile(&bad, Toward::Upstream, None).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    /// The values line up with the names `FieldRules` writes: `set` ones,
    /// then `add` ones, each in name order.
    #[test]
    fn values_follow_the_names_in_order() {
        let r = HeaderRules::compile(
            &cfg(&[("B", "b:$scheme"), ("A", "a")], &[("C", "$auth_x")], &[]),
            Toward::Client,
            None,
        )
        .unwrap()
        .expect("rules");
        let granted = [("X".to_owned(), b"gx".to_vec())];
        let v = Vars {
            scheme: "https",
            host: None,
            uri: "/",
            query: None,
            request_uri: b"/",
            captures: None,
            granted: &granted,
            client_cert: None,
        };
        let values = r.expand(&v);
        let mut out = Vec::new();
        assert!(r
            .names
            .write(&mut out, |i, b| b.extend_from_slice(&values[i])));
        assert_eq!(out, b"A: a\r\nB: b:https\r\nC: gx\r\n");
    }
}
