//! Address ranges (`10.0.0.0/8`, `fd00::/8`, `[::1]`, `all`): the one
//! parser behind every list of addresses in the configuration
//! (`trusted_proxies` of the proxy and of the PROXY protocol, the status
//! page's `allow`, a route's `address_rules`), so that all of them take
//! the same spellings.
//!
//! It lives here, at the bottom of the workspace, because the proxy's
//! sans-IO code needs it and every crate above can reach it; it does no
//! I/O. Hand-written rather than a dependency: matching is a mask and a
//! compare, and the only subtlety, IPv4-mapped IPv6 peers (what a
//! dual-stack socket reports for an IPv4 client), is one general-purpose
//! crates leave to the caller.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// One IPv4 or IPv6 network (an address and a prefix length), or every
/// address of both families (`all`, nginx's `allow all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The network's address, left-aligned in 128 bits for both families
    /// so that matching is one code path.
    net: u128,
    prefix: u8,
    family: Family,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
    /// `all`: both families, every address.
    Any,
}

/// Why a range was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CidrError {
    /// Not an address, or a prefix that is not a number.
    Syntax,
    /// A prefix longer than the address (over 32 for IPv4, 128 for IPv6).
    Prefix,
    /// Bits set past the prefix (`10.0.0.1/8`): almost always a typo for a
    /// host or another network, so it is refused rather than silently
    /// widened.
    HostBits,
}

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CidrError::Syntax => "not an address or address/prefix",
            CidrError::Prefix => "prefix longer than the address",
            CidrError::HostBits => "address has bits set past the prefix",
        })
    }
}

impl std::error::Error for CidrError {}

fn mask(prefix: u8) -> u128 {
    match prefix {
        0 => 0,
        p => u128::MAX << (128 - u32::from(p.min(128))),
    }
}

/// An address as 128 left-aligned bits and its family. IPv4-mapped IPv6
/// addresses (`::ffff:a.b.c.d`, what a dual-stack socket reports for an
/// IPv4 peer) count as IPv4, so `127.0.0.1/8` trusts them too.
fn bits(ip: IpAddr) -> (u128, bool) {
    match ip {
        IpAddr::V4(a) => (u128::from(u32::from(a)) << 96, true),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => (u128::from(u32::from(v4)) << 96, true),
            None => (u128::from(a), false),
        },
    }
}

/// An address made ready for matching against many ranges
/// ([`Cidr::contains_addr`]): the conversion [`Cidr::contains`] does for
/// each range, done once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addr {
    bits: u128,
    v4: bool,
}

impl From<IpAddr> for Addr {
    fn from(ip: IpAddr) -> Addr {
        let (bits, v4) = bits(ip);
        Addr { bits, v4 }
    }
}

impl Cidr {
    /// Whether `ip` is inside this network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.contains_addr(Addr::from(ip))
    }

    /// [`Cidr::contains`] for an address converted once.
    #[inline]
    pub fn contains_addr(&self, a: Addr) -> bool {
        let family = match self.family {
            Family::Any => return true,
            f => f == Family::V4,
        };
        a.v4 == family && a.bits & mask(self.prefix) == self.net
    }

    /// The prefix length (a bare address has the family's full length;
    /// `all` has 0).
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Every address of both families.
    pub const ALL: Cidr = Cidr {
        net: 0,
        prefix: 0,
        family: Family::Any,
    };
}

impl FromStr for Cidr {
    type Err = CidrError;

    /// `addr` or `addr/prefix`, IPv6 with or without brackets
    /// (`[::1]`, `[fd00::]/8`), or `all`.
    fn from_str(s: &str) -> Result<Cidr, CidrError> {
        if s == "all" {
            return Ok(Cidr::ALL);
        }
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let ip: IpAddr = match addr.strip_prefix('[').and_then(|a| a.strip_suffix(']')) {
            // Brackets are IPv6's (RFC 3986 §3.2.2), as in a URL or `listen`.
            Some(v6) => IpAddr::V6(v6.parse().map_err(|_| CidrError::Syntax)?),
            None => addr.parse().map_err(|_| CidrError::Syntax)?,
        };
        let (net, v4) = bits(ip);
        // A mapped range (`::ffff:10.0.0.0/104`) is written with an IPv6
        // prefix; it is stored as the IPv4 range it covers.
        let mapped = v4 && ip.is_ipv6();
        let full: u8 = if v4 && !mapped { 32 } else { 128 };
        let p = match prefix {
            None => full,
            Some(p) if !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()) => {
                p.parse::<u8>().map_err(|_| CidrError::Prefix)?
            }
            Some(_) => return Err(CidrError::Syntax),
        };
        if p > full {
            return Err(CidrError::Prefix);
        }
        let prefix = match (mapped, p.checked_sub(96)) {
            (false, _) => p,
            (true, Some(p4)) => p4,
            // Wider than the mapped block: it would cover plain IPv6
            // addresses as well, which no single family can express.
            (true, None) => return Err(CidrError::Prefix),
        };
        if net & !mask(prefix) != 0 {
            return Err(CidrError::HostBits);
        }
        let family = if v4 { Family::V4 } else { Family::V6 };
        Ok(Cidr {
            net,
            prefix,
            family,
        })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.family {
            Family::V4 => {
                let a = std::net::Ipv4Addr::from((self.net >> 96) as u32);
                write!(f, "{a}/{}", self.prefix)
            }
            Family::V6 => write!(f, "{}/{}", std::net::Ipv6Addr::from(self.net), self.prefix),
            Family::Any => f.write_str("all"),
        }
    }
}

/// The peers whose `Forwarded` and `X-Forwarded-*` fields are believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    nets: Vec<Cidr>,
}

impl TrustedProxies {
    pub fn new(nets: Vec<Cidr>) -> TrustedProxies {
        TrustedProxies { nets }
    }

    /// Parses a list such as the config's `trusted_proxies`.
    pub fn parse<'a>(list: impl IntoIterator<Item = &'a str>) -> Result<TrustedProxies, CidrError> {
        let nets = list
            .into_iter()
            .map(str::parse)
            .collect::<Result<Vec<Cidr>, _>>()?;
        Ok(TrustedProxies { nets })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.nets.iter().any(|n| n.contains(ip))
    }

    pub fn is_empty(&self) -> bool {
        self.nets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn ipv4_ranges_match_by_prefix() {
        let n: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(n.contains(ip("10.255.1.2")));
        assert!(!n.contains(ip("11.0.0.0")));
        let n: Cidr = "192.168.1.128/25".parse().unwrap();
        assert!(n.contains(ip("192.168.1.200")));
        assert!(!n.contains(ip("192.168.1.127")));
        let host: Cidr = "127.0.0.1".parse().unwrap();
        assert_eq!(host.prefix(), 32);
        assert!(host.contains(ip("127.0.0.1")) && !host.contains(ip("127.0.0.2")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.9")));
        assert!(!all.contains(ip("2001:db8::1")), "IPv4 /0 is not IPv6");
    }

    #[test]
    fn ipv6_ranges_match_by_prefix_with_or_without_brackets() {
        let n: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(n.contains(ip("2001:db8:ffff::1")));
        assert!(!n.contains(ip("2001:db9::1")));
        let n: Cidr = "[fd00::]/8".parse().unwrap();
        assert!(n.contains(ip("fdab::1")));
        let n: Cidr = "[::1]".parse().unwrap();
        assert_eq!(n.prefix(), 128);
        assert!(n.contains(ip("::1")));
        let all: Cidr = "::/0".parse().unwrap();
        assert!(all.contains(ip("2001:db8::1")));
        assert!(!all.contains(ip("10.0.0.1")), "IPv6 /0 is not IPv4");
    }

    #[test]
    fn an_ipv4_mapped_ipv6_peer_matches_ipv4_ranges() {
        // What a dual-stack listener reports for an IPv4 client.
        let n: Cidr = "127.0.0.0/8".parse().unwrap();
        assert!(n.contains(ip("::ffff:127.0.0.1")));
        let n: Cidr = "::ffff:10.0.0.0/104".parse().unwrap();
        assert_eq!(n.prefix(), 8);
        assert!(n.contains(ip("10.1.2.3")));
    }

    #[test]
    fn malformed_ranges_are_refused() {
        assert_eq!("10.0.0.0/33".parse::<Cidr>(), Err(CidrError::Prefix));
        assert_eq!("::/129".parse::<Cidr>(), Err(CidrError::Prefix));
        assert_eq!("10.0.0.1/8".parse::<Cidr>(), Err(CidrError::HostBits));
        for bad in [
            "",
            "10.0.0/8",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "10.0.0.0/ 8",
            "x/8",
            "10.0.0.0/8/8",
            "10.0.0.0/0008",
        ] {
            assert_eq!(bad.parse::<Cidr>(), Err(CidrError::Syntax), "{bad:?}");
        }
    }

    #[test]
    fn all_covers_both_families_and_only_as_a_whole_word() {
        let all: Cidr = "all".parse().unwrap();
        assert!(all.contains(ip("203.0.113.9")));
        assert!(all.contains(ip("2001:db8::1")));
        assert!(all.contains(ip("::ffff:10.0.0.1")));
        assert_eq!(all.prefix(), 0);
        for bad in ["ALL", "all/0", " all", "any"] {
            assert_eq!(bad.parse::<Cidr>(), Err(CidrError::Syntax), "{bad:?}");
        }
    }

    #[test]
    fn bracketed_ipv6_is_the_same_range_as_bare() {
        // The status page's `allow` once refused `[::1]` while
        // `trusted_proxies` took it: one parser, one set of spellings.
        for (a, b) in [
            ("[::1]", "::1"),
            ("[fd00::]/8", "fd00::/8"),
            ("[::1]/128", "::1"),
        ] {
            assert_eq!(a.parse::<Cidr>(), b.parse::<Cidr>(), "{a} vs {b}");
        }
        assert_eq!("[::1".parse::<Cidr>(), Err(CidrError::Syntax));
        assert_eq!("[10.0.0.1]".parse::<Cidr>(), Err(CidrError::Syntax));
    }

    #[test]
    fn a_range_prints_as_written() {
        for s in ["10.0.0.0/8", "2001:db8::/32", "127.0.0.1/32", "all"] {
            assert_eq!(s.parse::<Cidr>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn trusted_proxies_match_any_listed_range() {
        let t = TrustedProxies::parse(["127.0.0.1", "10.0.0.0/8", "::1"]).unwrap();
        assert!(t.contains(ip("10.2.3.4")));
        assert!(t.contains(ip("::1")));
        assert!(!t.contains(ip("192.0.2.1")));
        assert!(TrustedProxies::default().is_empty());
        assert!(!TrustedProxies::default().contains(ip("127.0.0.1")));
        assert!(TrustedProxies::parse(["10.0.0.0/8", "nope"]).is_err());
    }
}
