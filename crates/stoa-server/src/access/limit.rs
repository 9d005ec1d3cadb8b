//! `limit_requests = { rate = "10/s", burst = 20, key = "client-ip",
//! delay = false }` and `limit_connections = N`: per-client limits shared
//! by every worker (threads of one process, so a mutex-guarded table is
//! shared memory; nginx needs a shared-memory zone for the same).
//!
//! **Requests** follow the generic cell rate algorithm (GCRA, the token
//! bucket told as a time): each key keeps one instant, its "theoretical
//! arrival time" (TAT). A request at `now` is over the limit when
//! `max(TAT, now) - now > burst × T` (T = 1 / rate); otherwise TAT moves
//! to `max(TAT, now) + T`. So `burst + 1` requests pass at once and then
//! one per T, exactly nginx's `limit_req ... burst=N nodelay`. With
//! `delay = true` a request within the burst waits `max(TAT, now) - now`
//! first (nginx's `limit_req` without `nodelay`: the excess goes out at
//! the rate). Over the limit: 429 with `Retry-After` (RFC 6585 §4), the
//! seconds until one more would pass.
//!
//! Memory is bounded whatever the number of clients: a table holds at
//! most [`MAX_KEYS`] keys (each a 64-bit keyed hash of the client's key,
//! never the key itself: 48 bytes a key with the map's slot, about
//! 3 MiB a limit at most), split in [`SHARDS`] shards so workers rarely
//! wait on one another; past the bound the least recently seen key of the
//! shard is forgotten (that client starts again with a full burst).
//!
//! **Connections** (`limit_connections`) count the requests in flight per
//! client address, as nginx's `limit_conn` does (an HTTP/2 connection's
//! streams count one each): one past the bound gets 503, nginx's default
//! `limit_conn_status` (not 429: it is about concurrency, not rate, and
//! clients already retry a 503 later). The table holds only addresses
//! with requests in flight, so its size is bounded by the requests the
//! server holds at once.

use serde::Deserialize;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Keys a request limit remembers at most.
pub(crate) const MAX_KEYS: usize = 65_536;

/// Shards of a table (a power of two).
pub(crate) const SHARDS: usize = 16;

/// `limit_requests` as written.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitRequestsTable {
    /// `N/s`, `N/m` or `N/h` (nginx's `Nr/s` spelling too).
    pub(crate) rate: String,
    /// Requests over the rate let through at once (default 0).
    #[serde(default)]
    pub(crate) burst: u32,
    /// `client-ip` (default), `header:NAME` or `user`.
    pub(crate) key: Option<String>,
    /// Delay requests within the burst to the rate instead of passing
    /// them at once (default false).
    #[serde(default)]
    pub(crate) delay: bool,
}

/// What requests are counted by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LimitKey {
    ClientIp,
    /// A request header's value (lowercase name); requests without it
    /// are not limited (nginx: an empty key is not accounted).
    Header(String),
    /// The user `basic_auth` established (it runs before the limits);
    /// requests without one are not limited.
    User,
}

/// A request limit, shared by every worker.
pub(crate) struct RateLimit {
    /// T, the interval one request is worth, in ns.
    interval: u64,
    /// burst × T, in ns.
    tolerance: u64,
    pub(crate) key: LimitKey,
    pub(crate) delay: bool,
    epoch: Instant,
    /// Keys other than addresses (header values, users): SipHash, keyed
    /// per process.
    hasher: std::collections::hash_map::RandomState,
    /// The key of [`RateLimit::check_ip`]'s mix, random per process.
    seed: [u64; 3],
    shards: Box<[Mutex<Lru>]>,
}

impl std::fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("interval_ns", &self.interval)
            .field("tolerance_ns", &self.tolerance)
            .field("key", &self.key)
            .field("delay", &self.delay)
            .finish_non_exhaustive()
    }
}

/// What the limit says of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rate {
    /// Within the rate (or its burst, without `delay`).
    Pass,
    /// Within the burst: wait this long first (`delay = true`).
    Wait(Duration),
    /// Over: one more would pass after this long.
    Over(Duration),
}

/// Parses `10/s`, `600/m`, `1/h`, `10r/s`.
fn parse_rate(s: &str) -> Result<u64, String> {
    let bad = || format!("rate `{s}`: `N/s`, `N/m` or `N/h` with N ≥ 1");
    let (n, unit) = s.trim().split_once('/').ok_or_else(bad)?;
    let n: u64 = n.trim_end_matches('r').parse().map_err(|_| bad())?;
    let per: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(bad()),
    };
    if n == 0 || n > 1_000_000_000 {
        return Err(bad());
    }
    Ok(per * 1_000_000_000 / n)
}

impl LimitRequestsTable {
    pub(crate) fn build(&self) -> Result<Arc<RateLimit>, String> {
        let interval = parse_rate(&self.rate)?;
        let key = match self.key.as_deref() {
            None | Some("client-ip") => LimitKey::ClientIp,
            Some("user") => LimitKey::User,
            Some(k) => match k.strip_prefix("header:") {
                Some(name)
                    if !name.is_empty()
                        && name
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)) =>
                {
                    LimitKey::Header(name.to_ascii_lowercase())
                }
                _ => return Err(format!("key `{k}`: `client-ip`, `user` or `header:NAME`")),
            },
        };
        Ok(Arc::new(RateLimit::new(
            interval, self.burst, key, self.delay,
        )))
    }
}

impl RateLimit {
    pub(crate) fn new(interval_ns: u64, burst: u32, key: LimitKey, delay: bool) -> RateLimit {
        RateLimit {
            interval: interval_ns,
            tolerance: interval_ns.saturating_mul(u64::from(burst)),
            key,
            delay,
            epoch: Instant::now(),
            seed: {
                let rs = std::collections::hash_map::RandomState::new();
                [rs.hash_one(1u8), rs.hash_one(2u8), rs.hash_one(3u8) | 1]
            },
            hasher: std::collections::hash_map::RandomState::new(),
            shards: (0..SHARDS)
                .map(|_| Mutex::new(Lru::new(MAX_KEYS / SHARDS)))
                .collect(),
        }
    }

    /// Counts one request for `key`, now.
    pub(crate) fn check(&self, key: impl Hash) -> Rate {
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.check_at(self.hasher.hash_one(key), now)
    }

    /// Counts one request from the client address `ip` (IPv4-mapped ones
    /// as IPv4), now. The address is mixed with a per-process random key
    /// by two folded multiplies (foldhash's construction, what hashbrown
    /// hashes with by default) rather than SipHash: about a third of the
    /// instructions, on every request of a limited route, and an address
    /// cannot be chosen to collide without the key.
    pub(crate) fn check_ip(&self, ip: IpAddr) -> Rate {
        let bits: u128 = match canonical(ip) {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            // Apart from every IPv4 address.
            IpAddr::V6(a) => u128::from(a) ^ (1 << 127),
        };
        let [k0, k1, k2] = self.seed;
        let k = fold(
            fold((bits as u64) ^ k0, ((bits >> 64) as u64) ^ k1) ^ k2,
            k2,
        );
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.check_at(k, now)
    }

    /// [`RateLimit::check`] for the key's hash `k`, at `now` ns after the
    /// limit's epoch.
    pub(crate) fn check_at(&self, k: u64, now: u64) -> Rate {
        let shard = &self.shards[(k as usize) & (SHARDS - 1)];
        let mut lru = match shard.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let slot = lru.get_or_insert(k, now);
        let tat = (*slot).max(now);
        let ahead = tat - now;
        if ahead > self.tolerance {
            return Rate::Over(Duration::from_nanos(ahead - self.tolerance));
        }
        *slot = tat + self.interval;
        if self.delay && ahead > 0 {
            Rate::Wait(Duration::from_nanos(ahead))
        } else {
            Rate::Pass
        }
    }
}

/// The high and low halves of a 128-bit product, xored.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The `Retry-After` seconds of an [`Rate::Over`] (at least 1: RFC 9110
/// §10.2.3 counts whole seconds).
pub(crate) fn retry_after(d: Duration) -> u64 {
    let up = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    up.max(1)
}

/// One shard: keys (hashes) to their TAT, least recently seen evicted.
/// A doubly linked list through a slab: a hit moves a node to the front
/// without allocating.
struct Lru {
    map: HashMap<u64, u32, rustc_hash::FxBuildHasher>,
    nodes: Vec<Node>,
    head: u32,
    tail: u32,
    cap: usize,
}

struct Node {
    key: u64,
    tat: u64,
    prev: u32,
    next: u32,
}

const NIL: u32 = u32::MAX;

impl Lru {
    fn new(cap: usize) -> Lru {
        Lru {
            map: HashMap::default(),
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
            cap: cap.max(1),
        }
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let n = &self.nodes[i as usize];
            (n.prev, n.next)
        };
        match prev {
            NIL => self.head = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n as usize].prev = prev,
        }
    }

    fn push_front(&mut self, i: u32) {
        let old = self.head;
        {
            let n = &mut self.nodes[i as usize];
            n.prev = NIL;
            n.next = old;
        }
        match old {
            NIL => self.tail = i,
            o => self.nodes[o as usize].prev = i,
        }
        self.head = i;
    }

    /// The TAT slot of `key`, made the most recent; a new key starts at
    /// `now` (a full bucket), evicting the least recent one when full.
    fn get_or_insert(&mut self, key: u64, now: u64) -> &mut u64 {
        let i = match self.map.get(&key) {
            Some(&i) => {
                if self.head != i {
                    self.unlink(i);
                    self.push_front(i);
                }
                i
            }
            None => {
                let i = if self.nodes.len() < self.cap {
                    self.nodes.push(Node {
                        key,
                        tat: now,
                        prev: NIL,
                        next: NIL,
                    });
                    (self.nodes.len() - 1) as u32
                } else {
                    let i = self.tail;
                    self.unlink(i);
                    let old = std::mem::replace(&mut self.nodes[i as usize].key, key);
                    self.map.remove(&old);
                    self.nodes[i as usize].tat = now;
                    i
                };
                self.map.insert(key, i);
                self.push_front(i);
                i
            }
        };
        &mut self.nodes[i as usize].tat
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

/// `limit_connections`: requests in flight per client address.
pub(crate) struct ConnLimit {
    max: u32,
    shards: Box<[Mutex<HashMap<IpAddr, u32, rustc_hash::FxBuildHasher>>]>,
}

impl std::fmt::Debug for ConnLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnLimit")
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

/// One request in flight, counted until dropped.
pub(crate) struct ConnSlot {
    limit: Arc<ConnLimit>,
    ip: IpAddr,
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        let mut m = match self.limit.shard(self.ip).lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

/// An IPv4-mapped address as the IPv4 one, so both spellings of one
/// client count together.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl ConnLimit {
    pub(crate) fn new(max: u32) -> Result<Arc<ConnLimit>, String> {
        if max == 0 {
            return Err("limit_connections: at least 1".into());
        }
        Ok(Arc::new(ConnLimit {
            max,
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }))
    }

    fn shard(&self, ip: IpAddr) -> &Mutex<HashMap<IpAddr, u32, rustc_hash::FxBuildHasher>> {
        let i = match ip {
            IpAddr::V4(a) => u32::from(a) as usize,
            IpAddr::V6(a) => (u128::from(a) as usize) ^ ((u128::from(a) >> 64) as usize),
        };
        &self.shards[i & (SHARDS - 1)]
    }

    /// A slot for one more request from `ip`, or None at the bound.
    pub(crate) fn acquire(self: &Arc<Self>, ip: IpAddr) -> Option<ConnSlot> {
        let ip = canonical(ip);
        let mut m = match self.shard(ip).lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let n = m.entry(ip).or_insert(0);
        if *n >= self.max {
            return None;
        }
        *n += 1;
        drop(m);
        Some(ConnSlot {
            limit: Arc::clone(self),
            ip,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// A key's hash, for the arithmetic tests (any distinct values do).
    fn h(s: &str) -> u64 {
        u64::from(s.as_bytes()[0])
    }

    #[test]
    fn addresses_count_apart_and_mapped_ones_as_ipv4() {
        let l = RateLimit::new(S, 0, LimitKey::ClientIp, false);
        let ip = |s: &str| s.parse::<IpAddr>().expect(s);
        assert_eq!(l.check_ip(ip("192.0.2.1")), Rate::Pass);
        assert!(matches!(l.check_ip(ip("::ffff:192.0.2.1")), Rate::Over(_)));
        assert_eq!(l.check_ip(ip("192.0.2.2")), Rate::Pass);
        assert_eq!(l.check_ip(ip("::c000:201")), Rate::Pass, "not 192.0.2.1");
        assert_eq!(l.check_ip(ip("2001:db8::1")), Rate::Pass);
        assert!(matches!(l.check_ip(ip("2001:db8::1")), Rate::Over(_)));
    }

    #[test]
    fn rates_parse_in_nginx_and_plain_spellings() {
        assert_eq!(parse_rate("10/s"), Ok(S / 10));
        assert_eq!(parse_rate("10r/s"), Ok(S / 10));
        assert_eq!(parse_rate("30/m"), Ok(2 * S));
        assert_eq!(parse_rate("1/h"), Ok(3600 * S));
        for bad in ["0/s", "10", "10/d", "x/s", "-1/s", "10/ s"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn burst_plus_one_pass_at_once_then_one_per_interval_as_nginx_nodelay() {
        let l = RateLimit::new(S / 10, 3, LimitKey::ClientIp, false);
        let t0 = 5 * S;
        for i in 0..4 {
            assert_eq!(l.check_at(h("a"), t0), Rate::Pass, "request {i}");
        }
        // The fifth at once is over; one interval later one more passes.
        assert_eq!(
            l.check_at(h("a"), t0),
            Rate::Over(Duration::from_nanos(S / 10))
        );
        assert_eq!(
            l.check_at(h("a"), t0 + S / 20),
            Rate::Over(Duration::from_nanos(S / 20))
        );
        assert_eq!(l.check_at(h("a"), t0 + S / 10), Rate::Pass);
        assert!(matches!(l.check_at(h("a"), t0 + S / 10), Rate::Over(_)));
        // Other keys have their own bucket.
        assert_eq!(l.check_at(h("b"), t0), Rate::Pass);
        // Idle long enough, the whole burst is back.
        for _ in 0..4 {
            assert_eq!(l.check_at(h("a"), t0 + 10 * S), Rate::Pass);
        }
    }

    #[test]
    fn a_steady_client_at_the_rate_is_never_refused() {
        let l = RateLimit::new(S / 10, 0, LimitKey::ClientIp, false);
        for i in 0..100 {
            assert_eq!(l.check_at(1, S + i * (S / 10)), Rate::Pass, "{i}");
        }
        assert!(matches!(
            l.check_at(1, S + 99 * (S / 10) + 1),
            Rate::Over(_)
        ));
    }

    #[test]
    fn with_delay_the_burst_waits_its_turn_as_nginx_limit_req() {
        let l = RateLimit::new(S / 10, 2, LimitKey::ClientIp, true);
        assert_eq!(l.check_at(h("a"), S), Rate::Pass);
        assert_eq!(
            l.check_at(h("a"), S),
            Rate::Wait(Duration::from_nanos(S / 10))
        );
        assert_eq!(
            l.check_at(h("a"), S),
            Rate::Wait(Duration::from_nanos(2 * S / 10))
        );
        assert!(matches!(l.check_at(h("a"), S), Rate::Over(_)));
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after(Duration::from_millis(1)), 1);
        assert_eq!(retry_after(Duration::from_millis(1000)), 1);
        assert_eq!(retry_after(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after(Duration::ZERO), 1);
    }

    #[test]
    fn the_table_forgets_the_least_recently_seen_key_past_its_bound() {
        let mut lru = Lru::new(3);
        *lru.get_or_insert(1, 0) = 100;
        *lru.get_or_insert(2, 0) = 200;
        *lru.get_or_insert(3, 0) = 300;
        // 1 is seen again, so 2 is now the least recent.
        assert_eq!(*lru.get_or_insert(1, 0), 100);
        *lru.get_or_insert(4, 0) = 400;
        assert_eq!(lru.len(), 3);
        assert_eq!(*lru.get_or_insert(1, 7), 100);
        assert_eq!(*lru.get_or_insert(3, 7), 300);
        assert_eq!(*lru.get_or_insert(4, 7), 400);
        // 2 was forgotten: it comes back new, at `now`.
        assert_eq!(*lru.get_or_insert(2, 7), 7);
        assert_eq!(lru.len(), 3);
    }

    #[test]
    fn a_limit_holds_at_most_max_keys_however_many_clients() {
        let l = RateLimit::new(S, 0, LimitKey::ClientIp, false);
        for i in 0..(MAX_KEYS as u64 * 2) {
            l.check_at(i, S);
        }
        let held: usize = l
            .shards
            .iter()
            .map(|s| s.lock().expect("shard").len())
            .sum();
        assert!(held <= MAX_KEYS, "{held}");
    }

    #[test]
    fn connections_are_counted_per_address_until_their_slots_drop() {
        let c = ConnLimit::new(2).expect("limit");
        let a: IpAddr = "127.0.0.1".parse().expect("ip");
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().expect("ip");
        let b: IpAddr = "::1".parse().expect("ip");
        let s1 = c.acquire(a).expect("first");
        let s2 = c.acquire(mapped).expect("second, same client");
        assert!(c.acquire(a).is_none(), "third in flight");
        assert!(c.acquire(b).is_some(), "another address");
        drop(s1);
        let s3 = c.acquire(a).expect("a slot came back");
        drop((s2, s3));
        let held: usize = c
            .shards
            .iter()
            .map(|s| s.lock().expect("shard").len())
            .sum();
        assert_eq!(held, 0, "idle addresses are forgotten");
        assert!(ConnLimit::new(0).is_err());
    }

    #[test]
    fn keys_parse_and_bad_ones_are_refused() {
        let t = |key: Option<&str>| LimitRequestsTable {
            rate: "1/s".into(),
            burst: 0,
            key: key.map(str::to_owned),
            delay: false,
        };
        assert_eq!(t(None).build().expect("default").key, LimitKey::ClientIp);
        assert_eq!(t(Some("user")).build().expect("user").key, LimitKey::User);
        assert_eq!(
            t(Some("header:X-Api-Key")).build().expect("header").key,
            LimitKey::Header("x-api-key".into())
        );
        for bad in ["header:", "ip", "header:a b"] {
            assert!(t(Some(bad)).build().is_err(), "{bad}");
        }
    }
}
