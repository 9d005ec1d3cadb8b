//! `address_rules = ["allow 10.0.0.0/8", "allow ::1", "deny all"]`: the
//! client's address against a list of rules, first match wins (nginx's
//! `allow`/`deny` of ngx_http_access_module, Caddy's `remote_ip`
//! matcher). The address is the client's as the connection reports it:
//! the PROXY protocol's source on a listener that expects the header.
//! Ranges are read by the server's one parser ([`stoa_h1::cidr`]), so
//! `[::1]`, `fd00::/8` and `all` are spelt as everywhere else; an
//! IPv4-mapped IPv6 client (`::ffff:10.1.2.3`, a dual-stack socket's
//! IPv4 peer) matches IPv4 rules.
//!
//! No rule matching lets the request through, as in nginx: a list meant
//! to shut others out ends with `"deny all"`.

use std::net::IpAddr;
use stoa_h1::cidr::{Addr, Cidr};

/// The rules, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddressRules {
    rules: Box<[(bool, Cidr)]>,
}

impl AddressRules {
    /// Parses `allow RANGE` / `deny RANGE` lines.
    pub(crate) fn parse(lines: &[String]) -> Result<AddressRules, String> {
        if lines.is_empty() {
            return Err("an empty list: give at least one `allow` or `deny` rule".into());
        }
        let rules = lines
            .iter()
            .map(|line| {
                let (verb, range) = line
                    .trim()
                    .split_once(char::is_whitespace)
                    .ok_or_else(|| format!("`{line}`: `allow RANGE` or `deny RANGE`"))?;
                let allow = match verb {
                    "allow" => true,
                    "deny" => false,
                    _ => return Err(format!("`{line}`: starts with `allow` or `deny`")),
                };
                let net: Cidr = range.trim().parse().map_err(|e| format!("`{line}`: {e}"))?;
                Ok((allow, net))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(AddressRules {
            rules: rules.into(),
        })
    }

    /// Whether the first rule that covers `ip` allows it (yes when none
    /// does).
    #[inline]
    pub(crate) fn allows(&self, ip: IpAddr) -> bool {
        let a = Addr::from(ip);
        for (allow, net) in self.rules.iter() {
            if net.contains_addr(a) {
                return *allow;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(lines: &[&str]) -> AddressRules {
        let v: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        AddressRules::parse(&v).expect("rules")
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect(s)
    }

    #[test]
    fn the_first_matching_rule_decides_as_in_nginx() {
        // ngx_http_access_module's example, shortened.
        let r = rules(&[
            "deny 192.168.1.1",
            "allow 192.168.1.0/24",
            "allow 2001:db8::/32",
            "deny all",
        ]);
        assert!(!r.allows(ip("192.168.1.1")));
        assert!(r.allows(ip("192.168.1.2")));
        assert!(r.allows(ip("2001:db8::5")));
        assert!(!r.allows(ip("10.0.0.1")));
        assert!(!r.allows(ip("::1")));
    }

    #[test]
    fn no_matching_rule_lets_the_request_through() {
        let r = rules(&["deny 10.0.0.0/8"]);
        assert!(r.allows(ip("127.0.0.1")));
        assert!(!r.allows(ip("10.9.9.9")));
    }

    #[test]
    fn ipv4_and_ipv6_loopback_are_told_apart_and_mapped_clients_are_ipv4() {
        let r = rules(&["allow 127.0.0.1", "deny all"]);
        assert!(r.allows(ip("127.0.0.1")));
        assert!(r.allows(ip("::ffff:127.0.0.1")));
        assert!(!r.allows(ip("::1")));
        let r = rules(&["allow [::1]", "deny all"]);
        assert!(r.allows(ip("::1")));
        assert!(!r.allows(ip("127.0.0.1")));
    }

    #[test]
    fn malformed_rules_are_refused_with_the_rule() {
        for bad in [
            &["permit 10.0.0.0/8"][..],
            &["allow"],
            &["allow 10.0.0.0/33"],
            &["deny everyone"],
            &["allow 10.0.0.1/8"],
            &[],
        ] {
            let v: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            assert!(AddressRules::parse(&v).is_err(), "{bad:?}");
        }
        let v = vec!["allow  10.0.0.0/8 ".to_string()];
        assert!(AddressRules::parse(&v).is_ok(), "spaces around the range");
    }
}
